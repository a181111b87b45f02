package h3conn

import (
	"context"
	"net"
	"net/http/httptrace"
	"sync"
	"sync/atomic"
	"time"

	"github.com/quic-go/quic-go"
	"github.com/quic-go/quic-go/http3"
)

// Conn is one HTTP/3 connection to an alternative, shared by concurrent
// requests. It satisfies idlepool.SharedConn, IdleReporter and IdleCloser.
// Obtain it from Dialer.Dial.
//
// Stream accounting: ReserveStream claims a slot (up to
// Config.MaxConcurrentStreams); RoundTrip uses a claimed slot, or claims one
// itself when the caller did not; the slot is given back when the response
// body reaches EOF, fails or is closed, or when RoundTrip fails.
type Conn struct {
	d          *Dialer
	q          *quic.Conn
	cc         *http3.ClientConn
	maxStreams int
	dead       atomic.Bool // closed, GOAWAY seen or QUIC connection gone
	// pathDead is set (before dead) when the path watch judged the
	// network path dead; requests that fail then wrap ErrPathDead.
	pathDead atomic.Bool

	// watch judges the path (pathwatch.go); watchTimer runs its looks
	// (lookAtPath). The timer is made once, with the connection.
	watch      pathWatch
	watchTimer *time.Timer

	mu        sync.Mutex // guards reserved, active, idleSince, used, closed and the watch* fields
	reserved  int        // slots claimed by ReserveStream, not yet used
	active    int        // requests in flight (until their body is done)
	idleSince time.Time  // when active and reserved last dropped to zero
	used      bool       // a request was sent: GotConn reports Reused
	closed    bool
	// watching is set while watchTimer is armed or its look runs;
	// watchEvery is the time between looks; quietLooks counts looks in a
	// row that found c idle and quiet (two stop the watch).
	watching   bool
	watchEvery time.Duration
	quietLooks int
}

func newConn(d *Dialer, q *quic.Conn) *Conn {
	c := &Conn{
		d:          d,
		q:          q,
		cc:         d.h3.NewClientConn(q),
		maxStreams: d.cfg.maxStreams(),
		idleSince:  d.cfg.now(),
	}
	c.watchEvery = watchInterval(deadAfter(0, 0))
	c.watchTimer = time.AfterFunc(time.Hour, c.lookAtPath)
	c.watchTimer.Stop()
	return c
}

// watchClose marks c dead and forgets it once the QUIC connection ends for
// any reason (peer close, idle timeout, GOAWAY drained, Close). The callback
// goroutine starts only then.
func (c *Conn) watchClose() {
	context.AfterFunc(c.q.Context(), func() {
		c.dead.Store(true)
		c.d.forget(c)
	})
}

// ReserveStream claims one stream for a coming RoundTrip if c is usable and
// below its stream cap, and reports whether it did.
func (c *Conn) ReserveStream() bool {
	if c.dead.Load() {
		return false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed || c.reserved+c.active >= c.maxStreams {
		return false
	}
	c.reserved++
	return true
}

// Usable reports whether c may take new requests: false once it was closed,
// a request found it unable to open a stream (GOAWAY) or the QUIC
// connection ended. Capacity is ReserveStream's business.
func (c *Conn) Usable() bool { return !c.dead.Load() }

// IdleSince reports whether c has no stream in flight or reserved, and
// since when (on Config.Now's clock).
func (c *Conn) IdleSince() (time.Time, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.idleSince, c.active == 0 && c.reserved == 0
}

// CloseIfIdle closes c if no stream is in flight or reserved, atomically
// with respect to ReserveStream, and reports whether it did.
func (c *Conn) CloseIfIdle() bool {
	c.mu.Lock()
	if c.closed || c.active != 0 || c.reserved != 0 {
		c.mu.Unlock()
		return false
	}
	c.closed = true
	c.mu.Unlock()
	c.shutdown()
	return true
}

// Close closes the connection at once with H3_NO_ERROR; requests in flight
// fail. It is idempotent and returns nil.
func (c *Conn) Close() error {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return nil
	}
	c.closed = true
	c.mu.Unlock()
	c.shutdown()
	return nil
}

func (c *Conn) shutdown() {
	c.dead.Store(true)
	c.watchTimer.Stop() // a look in progress sees closed and stops too
	c.cc.CloseWithError(quic.ApplicationErrorCode(http3.ErrCodeNoError), "")
	c.d.forget(c)
}

// lookAtPath is one look of the path watch (pathwatch.go), run by
// watchTimer: it judges the path from quic-go's counters, closes c if the
// path is dead, and arms the next look unless c is closed, or idle and
// quiet for two looks in a row.
func (c *Conn) lookAtPath() {
	if c.q.Context().Err() != nil {
		c.mu.Lock()
		c.watching = false // the QUIC connection is over: nothing to judge
		c.mu.Unlock()
		return
	}
	st := c.q.ConnectionStats()
	limit := deadAfter(st.SmoothedRTT, st.MeanDeviation)
	v := c.watch.look(samplePath(st), time.Now(), limit)
	if v == pathDead {
		c.pathDied()
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.watchEvery = watchInterval(limit)
	if c.closed {
		c.watching = false
		return
	}
	if v == pathQuiet && c.active == 0 && c.reserved == 0 {
		c.quietLooks++
		if c.quietLooks >= 2 {
			c.watching = false
			return
		}
	} else {
		c.quietLooks = 0
	}
	c.watchTimer.Reset(c.watchEvery)
}

func (c *Conn) pathSample() pathSample { return samplePath(c.q.ConnectionStats()) }

func samplePath(st quic.ConnectionStats) pathSample {
	return pathSample{sent: st.PacketsSent, received: st.PacketsReceived}
}

// pathDied takes c out of use for good once its path was judged dead: no
// new request gets it, Config.OnPathDead is told (before the requests in
// flight fail, so that their retries find the alternative broken), and the
// connection is closed, which ends those requests with ErrPathDead.
func (c *Conn) pathDied() {
	if !c.pathDead.CompareAndSwap(false, true) {
		return
	}
	c.dead.Store(true)
	c.mu.Lock()
	c.watching = false
	c.mu.Unlock()
	if f := c.d.cfg.OnPathDead; f != nil {
		f(c)
	}
	c.Close()
}

// PathDead reports whether c was closed because its network path stopped
// acknowledging packets (see Config.OnPathDead).
func (c *Conn) PathDead() bool { return c.pathDead.Load() }

// LocalAddr and RemoteAddr are the QUIC connection's addresses.
func (c *Conn) LocalAddr() net.Addr { return c.q.LocalAddr() }

// RemoteAddr is the address of the alternative c is connected to.
func (c *Conn) RemoteAddr() net.Addr { return c.q.RemoteAddr() }

// acquire takes a slot for a request: a reserved one if any, else a new one.
// It reports what GotConn needs.
func (c *Conn) acquire() (info httptrace.GotConnInfo, ok bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	switch {
	case c.reserved > 0:
		c.reserved--
	case c.closed || c.dead.Load() || c.active >= c.maxStreams:
		return info, false
	}
	if c.used && c.active == 0 {
		info.WasIdle = true
		info.IdleTime = max(0, c.d.cfg.now().Sub(c.idleSince))
	}
	info.Reused = c.used
	c.used = true
	c.active++
	if !c.watching {
		// Rare (the watch stops only once c was idle and quiet for two
		// looks): a few atomic loads, no allocation.
		c.watching = true
		c.quietLooks = 0
		c.watch.restart(c.pathSample())
		c.watchTimer.Reset(c.watchEvery)
	}
	return info, true
}

// release gives back a slot taken by acquire.
func (c *Conn) release() {
	c.mu.Lock()
	c.active--
	idle := c.active == 0 && c.reserved == 0
	if idle {
		c.idleSince = c.d.cfg.now()
	}
	c.mu.Unlock()
	if idle {
		c.wentIdle()
	}
}

// wentIdle tells Config.OnIdle that c's last stream was given back.
func (c *Conn) wentIdle() {
	if f := c.d.cfg.OnIdle; f != nil {
		f(c)
	}
}

// ReleaseStream gives back a stream claimed by ReserveStream that will not
// be used (the request was abandoned before RoundTrip). Calling it without
// a reservation does nothing.
func (c *Conn) ReleaseStream() {
	c.mu.Lock()
	idle := false
	if c.reserved > 0 {
		c.reserved--
		if c.active == 0 && c.reserved == 0 {
			c.idleSince = c.d.cfg.now()
			idle = true
		}
	}
	c.mu.Unlock()
	if idle {
		c.wentIdle()
	}
}
