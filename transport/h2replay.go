package transport

import (
	"io"
	"sync"
)

// replayBody is the request body handed to an HTTP/2 connection. x/net
// closes the body on every error, but a request the server did not process
// may be sent again with the same, still unread, body; so a Close that
// arrives before RoundTrip's outcome is known is held, and the outcome
// decides: settle (pass it on, now and later), detach (keep the body for
// the retry) or closeBody (close it now). A nil *replayBody does nothing.
type replayBody struct {
	body io.ReadCloser

	// mu guards state. The body's Close is called outside it.
	mu    sync.Mutex
	state replayState
}

type replayState int

const (
	replayOpen      replayState = iota // outcome unknown, no Close yet
	replayCloseHeld                    // outcome unknown, Close held
	replaySettled                      // Close passes through
	replayDetached                     // the body belongs to a retry
	replayClosed                       // body closed
)

func (b *replayBody) Read(p []byte) (int, error) { return b.body.Read(p) }

// Close closes the body once the outcome is known, and holds it until then.
func (b *replayBody) Close() error {
	b.mu.Lock()
	switch b.state {
	case replayOpen:
		b.state = replayCloseHeld
		b.mu.Unlock()
		return nil
	case replaySettled:
		b.state = replayClosed
		b.mu.Unlock()
		return b.body.Close()
	}
	b.mu.Unlock()
	return nil
}

// settle is called when the request went out for good: a held Close is
// done now, and later ones pass through.
func (b *replayBody) settle() {
	if b == nil {
		return
	}
	b.mu.Lock()
	held := b.state == replayCloseHeld
	if held {
		b.state = replayClosed
	} else if b.state == replayOpen {
		b.state = replaySettled
	}
	b.mu.Unlock()
	if held {
		b.body.Close()
	}
}

// detach gives the (unread) body to a retry: this wrapper never closes it.
func (b *replayBody) detach() {
	if b == nil {
		return
	}
	b.mu.Lock()
	b.state = replayDetached
	b.mu.Unlock()
}

// closeBody closes the body now unless that already happened.
func (b *replayBody) closeBody() {
	if b == nil {
		return
	}
	b.mu.Lock()
	done := b.state == replayClosed || b.state == replayDetached
	b.state = replayClosed
	b.mu.Unlock()
	if !done {
		b.body.Close()
	}
}
