package h2conn

import (
	"context"
	"errors"
	"net/http"
	"sync"
	"sync/atomic"
	"time"
)

// The server's SETTINGS, and slots handed out before they arrive.
//
// Until the server's first SETTINGS frame is processed x/net assumes 100
// concurrent streams and grants reservations against that; a reservation
// granted then still counts after SETTINGS lower the limit. Legacy x/net
// (Go 1.26) then fails the surplus request as "client conn not usable",
// which would cost a healthy connection. Wrapped x/net (Go 1.27+) hands the
// request to net/http's client, which always waits for a stream: the
// request that holds net/http's new-stream lock waits for the count of
// streams and reservations to drop below the limit, while the surplus
// reservations belong to requests queued behind that lock, so no request
// of the connection goes out again (issue #7, the stream-limit row).
//
// So ferry does not ask x/net for a second reservation before the
// SETTINGS are known to have been processed. ClientConnState cannot tell
// (legacy reports MaxConcurrentStreams 0 before SETTINGS, wrapped reports
// the assumed 100), so the proof is one both modes show the same way: a
// frame the server sent after its SETTINGS was processed by x/net's single
// reader, that is the ack of one PING (the probe) or a response.
//
// Without an OnStreamFree hook a slot asked for before then is granted
// provisionally, with no x/net reservation behind it, so that concurrent
// first requests share the new connection as they do with net/http. Its
// RoundTrip waits for the probe and then takes a real x/net reservation,
// which is now counted against the server's own limit; if the connection
// is full the request is refused with ReasonStreamLimit (nothing sent, body
// unread) and the caller opens or finds another connection, as it would
// had the limit been known when it asked. With a hook (a pool that makes
// requests wait for streams) a second slot is refused instead until the
// probe ends, and the hook is called then (streamfree.go).
//
// A provisional slot waits for whichever proof comes first: the probe's
// ack or a response to another request of the connection (a server that
// answers requests but never PINGs must not hold it up). The probe is
// bounded by HTTP2Config.PingTimeout (15 s by default): a server that
// neither acknowledges it nor answers a request by then leaves x/net's own
// view of the limit, which is what net/http goes by; the waiting slots
// then reserve against it. A request's wait is also bounded by its own
// cancellation and by Config.ResponseHeaderTimeout (ErrResponseHeaderTimeout):
// net/http sends it at once and times it out that long after.

// peerSettings records whether the server's SETTINGS are known to have been
// processed, and runs the probe that finds out.
type peerSettings struct {
	settled atomic.Bool // a frame the server sent after its SETTINGS was processed
	probing atomic.Bool // the probe was started
	// probed is closed when the probe ends: acked or timed out (settled is
	// then true), or failed because the connection failed or closed.
	probed chan struct{}
	// seen is closed, once (seenOnce), when a response settles it first.
	seen     chan struct{}
	seenOnce sync.Once
	// died is closed, under Conn.mu (setDeadLocked), when the connection
	// becomes dead: a waiter for a stream of it waits no longer.
	died chan struct{}
}

func newPeerSettings() peerSettings {
	return peerSettings{probed: make(chan struct{}), seen: make(chan struct{}), died: make(chan struct{})}
}

// errStreamLimit is the error inside the *NotProcessedError for a
// provisional slot that found the connection at the server's limit.
var errStreamLimit = errors.New("h2conn: connection is at the server's concurrent-stream limit")

// errRequestCanceled is returned when Request.Cancel fires while a request
// waits for the server's SETTINGS (net/http's text).
var errRequestCanceled = errors.New("net/http: request canceled")

// startProbe sends the PING whose ack proves the server's SETTINGS were
// processed, once per connection, unless that is already known.
func (c *Conn) startProbe() {
	if !c.peer.settled.Load() && c.peer.probing.CompareAndSwap(false, true) {
		go c.probePeerSettings()
	}
}

// probePeerSettings pings the server. It ends when the ack arrives, when
// the ping times out (c.pingTimeout; settled then too, see above) or when
// the connection fails or closes, and then tells the OnStreamFree hook so
// that waiters look again (and take a stream, or find the connection
// unusable).
func (c *Conn) probePeerSettings() {
	ctx, cancel := context.WithTimeout(context.Background(), c.pingTimeout)
	err := c.cc.Ping(ctx)
	cancel()
	if err == nil || (errors.Is(err, context.DeadlineExceeded) && !c.isDead()) {
		c.peer.settled.Store(true)
	}
	close(c.peer.probed)
	if fn := c.free.fn.Load(); fn != nil {
		(*fn)()
	}
}

// AwaitPeerSettings waits while the connection refuses a second slot only
// because the server's SETTINGS are not known yet (ReserveStream with an
// OnStreamFree hook): until they are known, the probe ends otherwise, or
// ctx is done (ctx's error). A caller that would dial another connection
// for want of a slot here waits for this one instead, as requests beyond
// the first of a new connection wait for its SETTINGS without a hook. It
// reports whether there was anything to wait for: false at once when the
// SETTINGS are known, when no hook is set or the probe has not started (no
// slot is refused for them then), or when the connection is dead; it also
// ends when the connection dies during the wait.
func (c *Conn) AwaitPeerSettings(ctx context.Context) (bool, error) {
	if c.o != nil {
		if c.testHookAwaiting != nil && c.o.settingsPending() {
			c.testHookAwaiting()
		}
		return c.o.awaitPeer(ctx)
	}
	if c.peer.settled.Load() || !c.peer.probing.Load() || c.free.fn.Load() == nil || c.isDead() {
		return false, nil
	}
	if c.testHookAwaiting != nil {
		c.testHookAwaiting()
	}
	// A connection that dies meanwhile (GOAWAY, the checker) will not
	// take the stream: the caller dials instead of waiting for a probe a
	// server that stopped answering bounds only by PingTimeout
	// (TestAwaitPeerSettingsEndsAtDeath).
	select {
	case <-c.peer.probed:
	case <-c.peer.seen:
	case <-c.peer.died:
	case <-ctx.Done():
		return true, ctx.Err()
	}
	return true, nil
}

// PeerSettingsPending reports whether AwaitPeerSettings would wait now: a
// second slot is refused only because the server's SETTINGS are not known
// yet. A request that waits for a stream of this connection then waits
// where net/http would already have sent it, so the transport bounds that
// wait by the request's ResponseHeaderTimeout.
func (c *Conn) PeerSettingsPending() bool {
	if c.o != nil {
		return c.o.settingsPending()
	}
	return !c.peer.settled.Load() && c.peer.probing.Load() && c.free.fn.Load() != nil && !c.isDead()
}

// peerFrameSeen records that a frame the server sent after its SETTINGS (a
// response) was processed.
func (c *Conn) peerFrameSeen() {
	if !c.peer.settled.Load() {
		c.peer.settled.Store(true)
		c.peer.seenOnce.Do(func() { close(c.peer.seen) })
	}
}

// peerLimitKnown reports whether a second stream may be reserved from
// x/net: once the server's SETTINGS (and so its
// SETTINGS_MAX_CONCURRENT_STREAMS) are known to have been processed.
func (c *Conn) peerLimitKnown() bool { return c.peer.settled.Load() }

// confirmProvisional turns a provisional slot into an x/net reservation:
// it waits until the server's SETTINGS are known (or req is cancelled), then
// reserves against the server's limit. A connection that is full or failed
// meanwhile gives a *NotProcessedError with the body unread.
func (c *Conn) confirmProvisional(req *http.Request) error {
	if !c.peer.settled.Load() {
		ctx := req.Context()
		// net/http would have written the request by now and started its
		// ResponseHeaderTimeout: the wait must not outlast it (the request
		// then goes out with x/net's own timer, so a request the SETTINGS
		// released late is bounded by twice the timeout, not by the probe's
		// PingTimeout).
		var timeout <-chan time.Time
		if c.headerTimeout > 0 {
			tm := time.NewTimer(c.headerTimeout)
			defer tm.Stop()
			timeout = tm.C
		}
		select {
		case <-c.peer.probed:
		case <-c.peer.seen:
		case <-ctx.Done():
			return ctx.Err()
		case <-req.Cancel:
			return errRequestCanceled
		case <-timeout:
			return ErrResponseHeaderTimeout
		}
		if !c.peer.settled.Load() {
			return &NotProcessedError{Reason: ReasonConnUnusable, BodyUnread: true, Err: errNoSlot}
		}
	}
	if c.cc.ReserveNewRequest() {
		return nil
	}
	// Judged without waiting for x/net's write lock (judge.go).
	if c.unusableNow() {
		return &NotProcessedError{Reason: ReasonConnUnusable, BodyUnread: true, Err: errNoSlot}
	}
	return &NotProcessedError{Reason: ReasonStreamLimit, BodyUnread: true, Err: errStreamLimit}
}
