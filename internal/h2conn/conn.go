package h2conn

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/http"
	"time"

	"github.com/ferryhttp/ferry/internal/sockio"
	"golang.org/x/net/http2"
)

// ErrNotH2 is returned by NewClientConn for a TLS connection whose ALPN
// negotiation did not select "h2".
var ErrNotH2 = errors.New("h2conn: TLS connection did not negotiate h2")

// errNoSlot is the error inside the *NotProcessedError that RoundTrip returns
// when it was called without a reservation and could not take one.
var errNoSlot = errors.New("h2conn: connection has no stream available")

// Conn is one HTTP/2 client connection shared by many requests. It is safe
// for concurrent use. See the package documentation for the slot contract;
// the connection itself is clientConn (clientconn.go).
type Conn struct {
	nc  net.Conn
	tls *tls.ConnectionState // nil for cleartext HTTP/2
	o   *clientConn

	// testHookAwaiting, when set (tests only, before the AwaitPeerSettings
	// call it is to see), runs in AwaitPeerSettings just before it waits.
	testHookAwaiting func()
}

// NewClientConn makes nc an HTTP/2 client connection: it writes the client
// preface and SETTINGS built from cfg and starts the connection's frame
// reader. nc may be a TLS connection whose handshake negotiated "h2"
// (anything with a ConnectionState method is treated as TLS; a different
// ALPN result is ErrNotH2) or a cleartext connection speaking HTTP/2 with
// prior knowledge. NewClientConn owns nc from the call on: on any error nc
// is closed.
func NewClientConn(nc net.Conn, cfg Config) (*Conn, error) {
	if nc == nil {
		return nil, errors.New("h2conn: nil net.Conn")
	}
	c := &Conn{nc: nc}
	if cs, ok := nc.(interface{ ConnectionState() tls.ConnectionState }); ok {
		st := cs.ConnectionState()
		if !st.HandshakeComplete {
			nc.Close()
			return nil, errors.New("h2conn: TLS handshake not complete")
		}
		if st.NegotiatedProtocol != http2.NextProtoTLS {
			nc.Close()
			return nil, fmt.Errorf("%w (negotiated %q)", ErrNotH2, st.NegotiatedProtocol)
		}
		c.tls = &st
	}
	o, err := newOwnConn(nc, c.tls, cfg)
	if err != nil {
		return nil, fmt.Errorf("h2conn: start connection: %w", err)
	}
	c.o = o
	return c, nil
}

// NetConn returns the connection given to NewClientConn as it was
// dialled: the *net.TCPConn under it when it is a *sockio.Conn (raw socket
// I/O, used for cleartext HTTP/2), which is what httptrace's GotConn
// reports.
func (c *Conn) NetConn() net.Conn { return sockio.Unwrap(c.nc) }

// IOConn returns the connection given to NewClientConn, which the
// connection reads and writes.
func (c *Conn) IOConn() net.Conn { return c.nc }

// TLS returns the TLS state of the connection, or nil for cleartext HTTP/2.
func (c *Conn) TLS() *tls.ConnectionState { return c.tls }

// ReserveStream claims one request slot, reporting whether it did. It fails
// once the connection is not usable and, unless limits are strict, when the
// connection is at the peer's concurrent-stream limit. Before the peer's
// SETTINGS arrived a second slot is provisional (RoundTrip may refuse it
// with ReasonStreamLimit), or refused when an OnStreamFree hook is set.
// Each true result must be followed by exactly one RoundTrip or
// ReleaseStream.
func (c *Conn) ReserveStream() bool { return c.o.reserve() }

// ReleaseStream gives back a slot reserved by ReserveStream that will not be
// used by a RoundTrip. Calling it without an unused reservation does
// nothing.
func (c *Conn) ReleaseStream() { c.o.unreserve() }

// RoundTrip sends req on the connection in a slot taken by ReserveStream
// (without one it tries to take one, and fails with a *NotProcessedError if
// it cannot). The slot is released exactly once: on error, at once for a
// response without body, or when the body reaches EOF, fails, or is closed.
//
// req must be valid (ferry's transport validates before choosing a
// connection). RoundTrip fires httptrace GotConn and the per-request hooks.
// As net/http requires of a RoundTripper, req.Body is always closed, also
// on error: a caller that wants to resend an unread body
// (NotProcessedError.BodyUnread) must pass a wrapper whose Close it
// controls. Errors: *NotProcessedError when the server did not process the
// request (IsRetryable), and otherwise net/http's errors and texts (the
// context's error when the request was cancelled).
func (c *Conn) RoundTrip(req *http.Request) (*http.Response, error) { return c.o.roundTrip(req) }

// Usable reports whether the connection may still take new streams: false,
// for good, after GOAWAY, after it closed or failed, or once it was made
// single-use and used. A connection that is full is still usable.
func (c *Conn) Usable() bool { return c.o.usable() }

// IdleSince reports whether no slot is in use and, if so, since when (on
// Config.Clock). The pool closes the connection after IdleConnTimeout.
func (c *Conn) IdleSince() (time.Time, bool) { return c.o.idle() }

// CloseIfIdle closes the connection if no slot is in use, atomically with
// respect to ReserveStream, and reports whether the connection is now
// closed.
func (c *Conn) CloseIfIdle() bool { return c.o.closeIfIdle() }

// Close closes the connection at once; requests in flight fail. It is
// idempotent and returns nil.
func (c *Conn) Close() error {
	c.o.close()
	return nil
}

// Shutdown stops new streams, sends GOAWAY and waits until the streams in
// flight end, then closes the connection. If ctx ends first it returns
// ctx's error and the connection closes itself when its last slot is
// released.
func (c *Conn) Shutdown(ctx context.Context) error {
	if err := c.o.shutdown(ctx); err != nil {
		return fmt.Errorf("h2conn: shutdown: %w", err)
	}
	return nil
}

// Ping sends a PING frame and waits for its acknowledgement or ctx.
func (c *Conn) Ping(ctx context.Context) error { return c.o.ping(ctx) }

// OnStreamFree sets fn to be called, outside any lock of the connection,
// each time a slot is released and the connection has room for a new
// stream, and when the connection stops taking streams (so that waiters
// look again and find it unusable). fn must not block. A nil fn removes the
// hook. Set it before the connection is shared. With a hook set, no second
// slot is handed out until the server's SETTINGS arrived, and fn is called
// when they do.
func (c *Conn) OnStreamFree(fn func()) {
	if fn == nil {
		c.o.free.Store(nil)
		return
	}
	c.o.free.Store(&fn)
}

// AwaitPeerSettings waits while the connection refuses a second slot only
// because the server's SETTINGS have not arrived (ReserveStream with an
// OnStreamFree hook): until they arrive, the connection dies, or ctx is
// done (ctx's error). A caller that would dial another connection for want
// of a slot here waits for this one instead. It reports whether there was
// anything to wait for.
func (c *Conn) AwaitPeerSettings(ctx context.Context) (bool, error) {
	if c.testHookAwaiting != nil && c.o.settingsPending() {
		c.testHookAwaiting()
	}
	return c.o.awaitPeer(ctx)
}

// PeerSettingsPending reports whether AwaitPeerSettings would wait now: a
// second slot is refused only because the server's SETTINGS have not
// arrived. A request that waits for a stream of this connection then waits
// where net/http would already have sent it, so the transport bounds that
// wait by the request's ResponseHeaderTimeout.
func (c *Conn) PeerSettingsPending() bool { return c.o.settingsPending() }
