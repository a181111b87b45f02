package h1conn

import (
	"net/http"
	"sync/atomic"
	"time"
)

// Config is what a Conn reads of its transport's settings. One Config is
// shared by every connection of a transport; it must not change once a
// connection uses it, except HeaderEstimate, which the connections update.
type Config struct {
	ReadBufferSize  int   // the connection's read buffer; zero or less means 4 KiB
	WriteBufferSize int   // the connection's write buffer; zero or less means 4 KiB
	MaxHeaderBytes  int64 // the response head's limit, 1xx heads included (Got1xxResponse restarts it)

	ResponseHeaderTimeout time.Duration // from the end of the request's write; zero: none
	ExpectContinueTimeout time.Duration // wait for a 100 before sending the body anyway; zero: send at once
	DisableKeepAlives     bool          // close every connection after its request

	// DrainTime is how long the rest of a body closed early may take to
	// arrive before its connection is given up (drain.go); zero means
	// net/http's 50ms.
	DrainTime time.Duration

	// HeaderEstimate is the moving average of response header counts
	// (fixed point, x16) new connections start from to size header maps.
	HeaderEstimate atomic.Int32

	// Test seams, nil outside tests. WriteWaited is called each time the
	// end of a response waits for the request body's writer; InlineBound
	// with each bound a connection derives from its socket's send buffer
	// (inlinebound.go); BodyWriter each time a body writer goroutine
	// starts (asyncbody.go); SendQueue with each reading of a socket's send
	// queue (Linux).
	WriteWaited func()
	InlineBound func(c *Conn, bound int64)
	BodyWriter  func(c *Conn)
	SendQueue   func(queued int)
}

func (c *Config) readBufferSize() int {
	if c.ReadBufferSize > 0 {
		return c.ReadBufferSize
	}
	return 4 << 10
}

func (c *Config) writeBufferSize() int {
	if c.WriteBufferSize > 0 {
		return c.WriteBufferSize
	}
	return 4 << 10
}

// Owner is what a Conn needs from whoever dialled and pools it. The
// connection calls it from the goroutine running its request (WatchCancel,
// UnwatchCancel, PutIdle, Closed(true)) or from the pool's (Closed(false)).
type Owner interface {
	// PutIdle takes back the connection, ready for another request, into
	// its pool (or hands it to a request waiting for one). It returns
	// net/http's PutIdleConn error when the connection was closed instead.
	PutIdle() error
	// Closed is called once, when the connection closes. release: the
	// connection was out of the pool and its slot (MaxConnsPerHost) is to
	// be freed; false when the pool closed an idle connection, whose slot
	// it frees itself.
	Closed(release bool)
	// WatchCancel registers req, the request generation gen in flight on
	// the connection, for Transport.CancelRequest, which then calls
	// Conn.Abort(gen, ErrRequestCanceled). UnwatchCancel ends the
	// registration before the connection moves on.
	WatchCancel(req *http.Request, gen uint64)
	UnwatchCancel()
}
