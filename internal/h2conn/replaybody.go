package h2conn

import (
	"errors"
	"io"
	"sync"
)

// ReplayBody is the request body handed to an HTTP/2 connection. The
// connection closes the body on every error (as net/http requires of a
// RoundTripper), but a request the server did not process
// may be sent again with the same, still unread, body; so a Close that
// arrives before RoundTrip's outcome is known is held, and the outcome
// decides: Settle (pass it on, now and later), Detach (keep the body for
// the retry) or CloseBody (close it now). A nil *ReplayBody does nothing.
//
// Only an unread body is ever sent again, so a Close that comes once a
// Read has begun passes through at once: the connection closes the body to stop a
// Read blocked on the caller (the stream was reset, the connection lost)
// and waits for that Read before RoundTrip returns. A Read that begins
// after a held Close fails, as a Read of a closed body would.
type ReplayBody struct {
	body io.ReadCloser
	// inMemory: body holds its bytes in memory, exactly the request's
	// ContentLength of them, so reading it never waits (MarkInMemory).
	// Set before the body is handed to a connection, then read-only.
	inMemory bool

	// mu guards state and read. The body's Read and Close are called
	// outside it.
	mu    sync.Mutex
	state replayState
	read  bool // a Read has begun: the body will not be sent again
}

// NewReplayBody wraps body, the caller's request body, for one attempt.
func NewReplayBody(body io.ReadCloser) *ReplayBody { return &ReplayBody{body: body} }

// MarkInMemory tells the connection that the body holds its bytes in
// memory, exactly the request's ContentLength of them, and that the
// request has GetBody to send it again: reading it never waits for the
// server, so a small one may go out with the HEADERS, in the same write,
// on the caller's goroutine (inline.go). Call it before RoundTrip.
func (b *ReplayBody) MarkInMemory() { b.inMemory = true }

type replayState uint8

const (
	replayOpen      replayState = iota // outcome unknown, no Close yet
	replayCloseHeld                    // outcome unknown, Close held
	replaySettled                      // Close passes through
	replayDetached                     // the body belongs to a retry
	replayClosed                       // body closed
)

// ErrReplayBodyClosed is what a Read of the body returns after the
// connection closed it (the Close being held).
var ErrReplayBodyClosed = errors.New("http: invalid Read on closed Body")

func (b *ReplayBody) Read(p []byte) (int, error) {
	b.mu.Lock()
	if b.state == replayCloseHeld || b.state == replayClosed {
		b.mu.Unlock()
		return 0, ErrReplayBodyClosed
	}
	b.read = true
	b.mu.Unlock()
	return b.body.Read(p)
}

// Close closes the body once the outcome is known, and holds it until then
// unless a Read has begun.
func (b *ReplayBody) Close() error {
	b.mu.Lock()
	switch b.state {
	case replayOpen:
		if b.read {
			b.state = replayClosed
			b.mu.Unlock()
			return b.body.Close()
		}
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

// Settle is called when the request went out for good: a held Close is
// done now, and later ones pass through.
func (b *ReplayBody) Settle() {
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

// Detach gives the (unread) body to a retry: this wrapper never closes it.
func (b *ReplayBody) Detach() {
	if b == nil {
		return
	}
	b.mu.Lock()
	b.state = replayDetached
	b.mu.Unlock()
}

// CloseBody closes the body now unless that already happened.
func (b *ReplayBody) CloseBody() {
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
