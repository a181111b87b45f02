package server

import (
	"context"
	"sync"
	"time"

	"github.com/quic-go/quic-go"
	"github.com/quic-go/quic-go/http3"
	h3qlog "github.com/quic-go/quic-go/http3/qlog"
	"github.com/quic-go/quic-go/qlog"
	"github.com/quic-go/quic-go/qlogwriter"
)

// headerWatch bounds how long the request streams of one HTTP/3 connection
// may stay in their header phase: from the first frame of a client
// bidirectional stream until quic-go has parsed its HEADERS frame (or the
// stream was reset either way). quic-go's http3.Server reads the header
// before any code of ours sees the stream and offers no hook on the stream,
// so the watch learns both ends from quic-go's qlog events: it is the
// connection's qlogwriter.Trace (quic.Config.Tracer). A stream still in
// its header phase after timeout closes the whole connection with
// H3_REQUEST_INCOMPLETE, the only handle available.
//
// Cost: with a Tracer set, quic-go builds an event (with its frames) for
// every packet sent and received and http3 one per request header; the
// watch keeps a map entry per stream in its header phase (at most
// quic.Config.MaxIncomingStreams) and one timer per connection.
type headerWatch struct {
	timeout time.Duration
	user    qlogwriter.Trace // the user's quic.Config.Tracer trace, or nil

	mu      sync.Mutex // guards the fields below
	conn    *quic.Conn // set when HTTP/3 accepts the connection
	next    quic.StreamID
	pending map[quic.StreamID]time.Time // stream → when its header phase began
	// early holds streams whose header phase ended before the packet that
	// opened them was reported: quic-go reports a packet's frames after
	// delivering them, so http3 may parse a header first.
	early   map[quic.StreamID]struct{}
	timer   *time.Timer // runs check; made on first use
	armed   bool        // timer will run check
	expired bool        // a header timed out before conn was set
	ended   bool        // the connection is closing or closed
}

// maxImplicitStreams bounds the streams one frame can open implicitly
// (QUIC opens every lower stream ID with it); quic-go closes a connection
// that exceeds its stream limit, 100 by default.
const maxImplicitStreams = 1000

// headerWatchTracer returns the quic.Config.Tracer that installs a
// headerWatch with the given timeout on every connection, keeping the
// user's tracer (user may be nil).
func headerWatchTracer(timeout time.Duration, user func(context.Context, bool, quic.ConnectionID) qlogwriter.Trace) func(context.Context, bool, quic.ConnectionID) qlogwriter.Trace {
	return func(ctx context.Context, isClient bool, id quic.ConnectionID) qlogwriter.Trace {
		w := &headerWatch{timeout: timeout, pending: make(map[quic.StreamID]time.Time)}
		if user != nil {
			w.user = user(ctx, isClient, id)
		}
		return w
	}
}

// AddProducer returns a recorder feeding the watch and the user's trace.
func (w *headerWatch) AddProducer() qlogwriter.Recorder {
	r := &headerRecorder{w: w}
	if w.user != nil {
		r.user = w.user.AddProducer()
	}
	return r
}

// attach gives the watch its connection, once HTTP/3 accepted it, and
// closes it at once if a header already timed out.
func (w *headerWatch) attach(c *quic.Conn) {
	w.mu.Lock()
	w.conn = c
	closeNow := w.expired && !w.ended
	w.ended = w.ended || closeNow
	w.mu.Unlock()
	if closeNow {
		closeIncomplete(c)
	}
	context.AfterFunc(c.Context(), w.stop)
}

// stop disarms the timer once the connection has ended.
func (w *headerWatch) stop() {
	w.mu.Lock()
	w.ended = true
	if w.timer != nil {
		w.timer.Stop()
	}
	w.mu.Unlock()
}

// opened records the header phase of id, and of the lower client
// bidirectional streams it opens implicitly, as beginning now.
func (w *headerWatch) opened(id quic.StreamID) {
	if id%4 != 0 { // not a client-initiated bidirectional stream
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if id < w.next || w.ended {
		return
	}
	now := time.Now()
	for s, n := w.next, 0; s <= id && n < maxImplicitStreams; s, n = s+4, n+1 {
		if _, done := w.early[s]; done {
			delete(w.early, s)
			continue
		}
		w.pending[s] = now
	}
	w.next = id + 4
	if len(w.pending) == 0 || w.armed {
		return // an armed timer is due for an older entry already
	}
	// Not armed: every pending entry is from now.
	w.armed = true
	if w.timer == nil {
		w.timer = time.AfterFunc(w.timeout, w.check)
	} else {
		w.timer.Reset(w.timeout)
	}
}

// finished ends the header phase of id.
func (w *headerWatch) finished(id quic.StreamID) {
	w.mu.Lock()
	if id >= w.next && id%4 == 0 {
		if w.early == nil {
			w.early = make(map[quic.StreamID]struct{})
		}
		w.early[id] = struct{}{}
	} else {
		delete(w.pending, id)
	}
	w.mu.Unlock()
}

// check runs when the oldest header may have timed out: it closes the
// connection if one has, else re-arms for the oldest remaining.
func (w *headerWatch) check() {
	w.mu.Lock()
	w.armed = false
	if w.ended || len(w.pending) == 0 {
		w.mu.Unlock()
		return
	}
	oldest := time.Time{}
	for _, t := range w.pending {
		if oldest.IsZero() || t.Before(oldest) {
			oldest = t
		}
	}
	if wait := time.Until(oldest.Add(w.timeout)); wait > 0 {
		w.armed = true
		w.timer.Reset(wait)
		w.mu.Unlock()
		return
	}
	c := w.conn
	if c == nil {
		w.expired = true // attach closes it
	} else {
		w.ended = true
	}
	w.mu.Unlock()
	if c != nil {
		closeIncomplete(c)
	}
}

// closeIncomplete closes c for a request header that did not arrive in
// time; it blocks until quic-go has closed it, so it runs outside locks.
func closeIncomplete(c *quic.Conn) {
	c.CloseWithError(quic.ApplicationErrorCode(http3.ErrCodeRequestIncomplete), "request header timeout")
}

// headerRecorder is one producer of a headerWatch's events.
type headerRecorder struct {
	w    *headerWatch
	user qlogwriter.Recorder // nil without a user tracer
}

func (r *headerRecorder) RecordEvent(ev qlogwriter.Event) {
	switch e := ev.(type) {
	case qlog.PacketReceived:
		for _, f := range e.Frames {
			switch fr := f.Frame.(type) {
			case *qlog.StreamFrame:
				r.w.opened(fr.StreamID)
			case *qlog.ResetStreamFrame:
				r.w.opened(fr.StreamID)
				r.w.finished(fr.StreamID)
			}
		}
	case qlog.PacketSent:
		// quic-go refusing a stream (a bad or too large header, an early
		// end, GOAWAY) resets it or stops reading it.
		for _, f := range e.Frames {
			switch fr := f.Frame.(type) {
			case *qlog.ResetStreamFrame:
				r.w.finished(fr.StreamID)
			case *qlog.StopSendingFrame:
				r.w.finished(fr.StreamID)
			}
		}
	case h3qlog.FrameParsed:
		if _, ok := e.Frame.Frame.(h3qlog.HeadersFrame); ok {
			r.w.finished(e.StreamID)
		}
	}
	if r.user != nil {
		r.user.RecordEvent(ev)
	}
}

func (r *headerRecorder) Close() error {
	if r.user != nil {
		return r.user.Close()
	}
	return nil
}
