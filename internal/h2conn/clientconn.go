package h2conn

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"crypto/tls"
	"errors"
	"math"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
)

// ferry's HTTP/2 client connection: the connection state
// and the SETTINGS exchange. It uses only x/net's Framer and hpack; the
// frame reader is read.go, the writes write.go, streams stream.go, flow
// control flow.go, header rules headers.go, and the ways a connection or a
// stream ends goaway.go.

// Defaults, as net/http's HTTP/2 client has them.
const (
	defaultStreamWindow  = 4 << 20  // our receive window per stream
	defaultConnWindow    = 1 << 30  // our receive window per connection
	defaultMaxReadFrame  = 1 << 20  // SETTINGS_MAX_FRAME_SIZE we announce
	defaultHeaderTable   = 4096     // HPACK dynamic table size (RFC 7541)
	defaultResponseBytes = 10 << 20 // net/http's MaxResponseHeaderBytes
	initialWindow        = 65535    // every window before SETTINGS (RFC 9113)
	minFrameSize         = 16384    // the peer's frame size before SETTINGS
	maxWindow            = math.MaxInt32
	// assumedMaxStreams is the peer's stream limit assumed until its
	// SETTINGS arrive (or when they never name one), as net/http does.
	assumedMaxStreams = 100
	// strayAllowance is how many frames for streams that are already gone
	// the connection processes before it gives up on the peer, and
	// strayPerReset what each stream this side reset adds to it.
	strayAllowance = 4096
	strayPerReset  = 512
	// defaultPingTimeout is net/http's default HTTP2Config.PingTimeout: it
	// bounds this side's PINGs and the wait for the peer's SETTINGS.
	defaultPingTimeout = 15 * time.Second
)

// clientPreface starts every HTTP/2 connection from a client.
const clientPreface = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"

// clientConn is ferry's HTTP/2 client connection; the exported Conn
// forwards to it.
type clientConn struct {
	nc  net.Conn // what the connection reads and writes (Conn.NetConn unwraps it)
	tls *tls.ConnectionState
	now func() time.Time

	// Settings from Config, fixed at creation.
	strict             bool
	singleUse          bool
	disableCompression bool
	continueTimeout    time.Duration
	headerTimeout      time.Duration
	pingTimeout        time.Duration
	sendPingTimeout    time.Duration
	maxHeaderList      uint32 // our SETTINGS_MAX_HEADER_LIST_SIZE
	streamWindow       int32  // our receive window per stream
	connWindow         int32  // our receive window for the connection
	countError         func(string)

	// fr reads frames on the reader goroutine only; its write side is used
	// only under wmu. It reuses its DATA frames: a frame's payload is
	// valid only until the next read (onData copies it).
	fr *http2.Framer
	// canon caches canonical response field names (canonicalKey); the
	// frame reader's only, like hdec and hblock, which decode the header
	// blocks (headerblock.go).
	canon  map[string]string
	hdec   *hpack.Decoder
	hblock headerBlock

	// wmu is the write lock: it guards the framer's write side, bw, henc,
	// hbuf and werr, and so orders whole frames (and HEADERS with their
	// CONTINUATIONs) on the socket. It is held across socket writes (that
	// is what it orders) but never while waiting for anything else; c.mu
	// may be taken under it, never the other way round.
	wmu  sync.Mutex
	bw   *bufio.Writer
	henc fieldCache // the HPACK encoder, writing into hbuf
	hbuf bytes.Buffer
	werr error // the first write error: the socket is done for

	// mu guards the connection and stream state below and every stream's
	// fields marked as such. Never held across a socket write or a hook.
	mu sync.Mutex
	// wake is broadcast when a send window grows, a stream goes away,
	// SETTINGS arrive or a stream or the connection fails: writers waiting
	// for window and requests waiting for a stream look again.
	wake    sync.Cond
	streams map[uint32]*stream
	nextID  uint32
	// lastOpened is the highest stream ID this side opened.
	lastOpened uint32
	// reserved counts slots granted by ReserveStream not yet used by a
	// RoundTrip nor given back; busy counts slots in use (reserved, in
	// RoundTrip or with a response body open).
	reserved, busy int
	rounds         int
	idleSince      time.Time
	dead           bool  // no new stream will be opened
	closed         bool  // nc.Close was called (or is being called)
	closeErr       error // what streams get when this side closed
	readErr        error // why the reader stopped; nil while it runs
	goAway         bool
	goAwayID       uint32
	goAwayCode     http2.ErrCode
	goAwayDebug    string
	settled        bool // the peer's first SETTINGS were processed (or given up on)
	peerSettings   bool // a SETTINGS frame from the peer was processed
	maxStreams     uint32
	peerWindow     int32  // the peer's SETTINGS_INITIAL_WINDOW_SIZE
	peerMaxFrame   uint32 // the peer's SETTINGS_MAX_FRAME_SIZE
	peerMaxHeaders uint32 // the peer's SETTINGS_MAX_HEADER_LIST_SIZE; 0 = none
	sendWindow     int32  // connection send window
	recvAvail      int32  // connection receive window left
	recvUnacked    int32  // consumed connection window not yet returned
	stray          int    // frames for gone streams still allowed
	unackedResets  int    // streams reset by this side awaiting the PING ack (slots.go)
	pings          map[[8]byte]chan struct{}
	freeBufs       [][]byte // receive buffers of finished streams (recycleBufLocked)
	freeBytes      int      // the capacity of freeBufs' buffers, together

	// settledc is closed when settled becomes true; diedc when dead does.
	settledc chan struct{}
	diedc    chan struct{}
	// readerDone is closed when the reader goroutine has ended.
	readerDone chan struct{}
	// settleTimer gives up on the peer's SETTINGS after pingTimeout.
	settleTimer *time.Timer
	// lastRead is when the reader last read a frame (UnixNano), kept only
	// for the health check (SendPingTimeout).
	lastRead atomic.Int64
	// free is the OnStreamFree hook.
	free atomic.Pointer[func()]
}

// newOwnConn starts the own connection on nc (TLS already checked by the
// caller): preface, SETTINGS and the connection window, then the reader.
func newOwnConn(nc net.Conn, tlsState *tls.ConnectionState, cfg Config) (*clientConn, error) {
	c := &clientConn{
		nc: nc, tls: tlsState, now: cfg.Clock,
		strict: cfg.strict(), singleUse: cfg.DisableKeepAlives,
		disableCompression: cfg.DisableCompression,
		continueTimeout:    cfg.ExpectContinueTimeout,
		headerTimeout:      cfg.ResponseHeaderTimeout,
		pingTimeout:        defaultPingTimeout,
		streamWindow:       defaultStreamWindow,
		connWindow:         defaultConnWindow,
		streams:            make(map[uint32]*stream),
		nextID:             1,
		maxStreams:         assumedMaxStreams,
		peerWindow:         initialWindow,
		peerMaxFrame:       minFrameSize,
		sendWindow:         initialWindow,
		stray:              strayAllowance,
		settledc:           make(chan struct{}),
		diedc:              make(chan struct{}),
		readerDone:         make(chan struct{}),
	}
	c.wake.L = &c.mu
	if c.now == nil {
		c.now = time.Now
	}
	c.idleSince = c.now()
	maxRespBytes := cfg.MaxResponseHeaderBytes
	if maxRespBytes <= 0 {
		maxRespBytes = defaultResponseBytes
	}
	// net/http pads the limit by ten fields' HTTP/2 overhead.
	c.maxHeaderList = uint32(min(maxRespBytes+10*32, math.MaxUint32))
	readFrame := uint32(defaultMaxReadFrame)
	decTable, encTable := uint32(defaultHeaderTable), uint32(defaultHeaderTable)
	var writeTimeout time.Duration
	if h := cfg.HTTP2; h != nil {
		if h.PingTimeout > 0 {
			c.pingTimeout = h.PingTimeout
		}
		c.sendPingTimeout = h.SendPingTimeout
		writeTimeout = h.WriteByteTimeout
		if h.MaxReceiveBufferPerStream > 0 {
			c.streamWindow = int32(min(h.MaxReceiveBufferPerStream, maxWindow))
		}
		if h.MaxReceiveBufferPerConnection >= initialWindow {
			c.connWindow = int32(min(h.MaxReceiveBufferPerConnection, maxWindow))
		}
		if h.MaxReadFrameSize >= minFrameSize && h.MaxReadFrameSize <= 1<<24-1 {
			readFrame = uint32(h.MaxReadFrameSize)
		}
		if h.MaxDecoderHeaderTableSize > 0 {
			decTable = uint32(h.MaxDecoderHeaderTableSize)
		}
		if h.MaxEncoderHeaderTableSize > 0 {
			encTable = uint32(h.MaxEncoderHeaderTableSize)
		}
		c.countError = h.CountError
	}
	c.recvAvail = c.connWindow

	var w = nc
	if writeTimeout > 0 {
		w = &deadlineConn{Conn: nc, timeout: writeTimeout}
	}
	c.bw = bufio.NewWriterSize(w, 16<<10)
	c.fr = http2.NewFramer(c.bw, bufio.NewReaderSize(nc, 16<<10))
	c.fr.SetMaxReadFrameSize(readFrame)
	c.fr.SetReuseFrames()
	c.hdec = hpack.NewDecoder(decTable, c.emitField)
	c.henc = newFieldCache(&c.hbuf, encTable)

	settings := []http2.Setting{
		{ID: http2.SettingEnablePush, Val: 0},
		{ID: http2.SettingInitialWindowSize, Val: uint32(c.streamWindow)},
		{ID: http2.SettingMaxFrameSize, Val: readFrame},
		{ID: http2.SettingMaxHeaderListSize, Val: c.maxHeaderList},
	}
	if decTable != defaultHeaderTable {
		settings = append(settings, http2.Setting{ID: http2.SettingHeaderTableSize, Val: decTable})
	}
	c.bw.WriteString(clientPreface)
	c.fr.WriteSettings(settings...)
	if more := c.connWindow - initialWindow; more > 0 {
		c.fr.WriteWindowUpdate(0, uint32(more))
	}
	if err := c.bw.Flush(); err != nil {
		nc.Close()
		return nil, err
	}
	c.lastRead.Store(time.Now().UnixNano())
	c.settleTimer = time.AfterFunc(c.pingTimeout, c.giveUpOnSettings)
	go c.readLoop()
	if c.sendPingTimeout > 0 {
		go c.healthCheck()
	}
	return c, nil
}

// deadlineConn bounds each write by a deadline (HTTP2Config.WriteByteTimeout):
// a write that makes no progress for that long fails.
type deadlineConn struct {
	net.Conn
	timeout time.Duration
}

func (d *deadlineConn) Write(p []byte) (int, error) {
	total := 0
	for len(p) > 0 {
		d.Conn.SetWriteDeadline(time.Now().Add(d.timeout))
		n, err := d.Conn.Write(p)
		total += n
		p = p[n:]
		if err != nil {
			if n > 0 && errors.Is(err, os.ErrDeadlineExceeded) {
				continue // progress was made: extend the deadline
			}
			return total, err
		}
	}
	d.Conn.SetWriteDeadline(time.Time{})
	return total, nil
}

// giveUpOnSettings treats the peer's SETTINGS as arrived when they have not
// come within pingTimeout: waiting slots go by the assumed limit, which is
// what net/http goes by.
func (c *clientConn) giveUpOnSettings() {
	c.mu.Lock()
	wakes := 0
	if c.settleLocked() {
		wakes = min(c.roomCountLocked(), maxWakes)
	}
	c.mu.Unlock()
	for range wakes {
		c.notifyFree()
	}
}

// settleLocked marks the peer's SETTINGS as known; c.mu held. It reports
// whether that is news.
func (c *clientConn) settleLocked() bool {
	if c.settled {
		return false
	}
	c.settled = true
	close(c.settledc)
	c.wake.Broadcast()
	return true
}

// applySettings applies the peer's SETTINGS frame (not an ack). It returns
// a connection error for an invalid value.
func (c *clientConn) applySettings(f *http2.SettingsFrame) error {
	var tableSize uint32
	var tableSet bool
	c.mu.Lock()
	roomBefore := 0
	if c.settled {
		roomBefore = c.roomCountLocked()
	}
	c.peerSettings = true
	err := f.ForeachSetting(func(s http2.Setting) error {
		switch s.ID {
		case http2.SettingMaxConcurrentStreams:
			c.maxStreams = s.Val
		case http2.SettingInitialWindowSize:
			if s.Val > maxWindow {
				return http2.ConnectionError(http2.ErrCodeFlowControl)
			}
			delta := int64(s.Val) - int64(c.peerWindow)
			for _, cs := range c.streams {
				nw := int64(cs.sendWindow) + delta
				if nw > maxWindow {
					return http2.ConnectionError(http2.ErrCodeFlowControl)
				}
				cs.sendWindow = int32(nw)
			}
			c.peerWindow = int32(s.Val)
		case http2.SettingMaxFrameSize:
			if s.Val < minFrameSize || s.Val > 1<<24-1 {
				return http2.ConnectionError(http2.ErrCodeProtocol)
			}
			c.peerMaxFrame = s.Val
		case http2.SettingMaxHeaderListSize:
			c.peerMaxHeaders = s.Val
		case http2.SettingHeaderTableSize:
			tableSize, tableSet = s.Val, true
		case http2.SettingEnablePush:
			if s.Val > 1 {
				return http2.ConnectionError(http2.ErrCodeProtocol)
			}
		}
		return nil
	})
	wakes := 0
	if err == nil {
		c.settleLocked()
		c.settleTimer.Stop()
		c.wake.Broadcast() // windows or the stream limit may have grown
		// One call of the hook per stream that became available: the pool
		// wakes one waiter per call.
		wakes = min(c.roomCountLocked()-roomBefore, maxWakes)
	}
	c.mu.Unlock()
	if err != nil {
		return err
	}
	c.wmu.Lock()
	if tableSet {
		c.henc.setMaxDynamicTableSize(tableSize)
	}
	c.fr.WriteSettingsAck()
	werr := c.flushLocked()
	c.wmu.Unlock()
	for range wakes {
		c.notifyFree()
	}
	return werr
}

// maxWakes bounds the hook calls one SETTINGS frame makes.
const maxWakes = 256

// roomCountLocked is how many more streams the peer's limit allows beside
// the open ones and the granted slots; c.mu held.
func (c *clientConn) roomCountLocked() int {
	return max(int(min(c.maxStreams, 1<<20))-len(c.streams)-c.unackedResets-c.reserved, 0)
}

// ping sends a PING and waits for its ack, ctx, or the connection's end.
func (c *clientConn) ping(ctx context.Context) error { return c.pingWith(ctx, nil) }

// pingWith is ping; before, when set, writes frames to go out with the
// PING in one flush (under c.wmu).
func (c *clientConn) pingWith(ctx context.Context, before func()) error {
	var data [8]byte
	ch := make(chan struct{})
	c.mu.Lock()
	if c.pings == nil {
		c.pings = make(map[[8]byte]chan struct{})
	}
	for {
		rand.Read(data[:])
		if _, taken := c.pings[data]; !taken {
			break
		}
	}
	c.pings[data] = ch
	readErr := c.readErr
	c.mu.Unlock()
	defer func() {
		c.mu.Lock()
		delete(c.pings, data)
		c.mu.Unlock()
	}()
	if readErr != nil {
		return readErr
	}
	c.wmu.Lock()
	if before != nil && c.werr == nil {
		before()
	}
	c.fr.WritePing(false, data)
	err := c.flushLocked()
	c.wmu.Unlock()
	if err != nil {
		return err
	}
	select {
	case <-ch:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	case <-c.readerDone:
		return errClientConnLost
	}
}

// healthCheck pings the peer when no frame arrived for sendPingTimeout and
// closes the connection when the PING is not answered within pingTimeout
// (HTTP2Config.SendPingTimeout and PingTimeout).
func (c *clientConn) healthCheck() {
	t := time.NewTimer(c.sendPingTimeout)
	defer t.Stop()
	for {
		select {
		case <-c.readerDone:
			return
		case <-t.C:
		}
		since := time.Since(time.Unix(0, c.lastRead.Load()))
		if since < c.sendPingTimeout {
			t.Reset(c.sendPingTimeout - since)
			continue
		}
		ctx, cancel := context.WithTimeout(context.Background(), c.pingTimeout)
		err := c.ping(ctx)
		cancel()
		if err != nil {
			c.closeWith(errPingTimeout)
			return
		}
		t.Reset(c.sendPingTimeout)
	}
}

// notifyFree calls the OnStreamFree hook, outside every lock.
func (c *clientConn) notifyFree() {
	if fn := c.free.Load(); fn != nil {
		(*fn)()
	}
}

// setDeadLocked stops new streams; c.mu held.
func (c *clientConn) setDeadLocked() {
	if !c.dead {
		c.dead = true
		close(c.diedc)
		c.wake.Broadcast()
	}
}

// closeWith closes the socket once, with err as what the streams in flight
// get; the reader then fails them.
func (c *clientConn) closeWith(err error) {
	c.mu.Lock()
	c.setDeadLocked()
	already := c.closed
	c.closed = true
	if c.closeErr == nil {
		c.closeErr = err
	}
	c.mu.Unlock()
	if !already {
		c.nc.Close()
	}
}

// closeIfDoneLocked reports, with c.mu held, whether a dead connection
// with no slot and no stream left must now be closed (by the caller,
// outside c.mu, through closeWith); it marks it closed.
func (c *clientConn) closeIfDoneLocked() bool {
	if c.dead && !c.closed && c.busy == 0 && len(c.streams) == 0 {
		c.closed = true
		if c.closeErr == nil {
			c.closeErr = errClientConnClosed
		}
		return true
	}
	return false
}

// usableLocked reports whether a new stream may still be opened; c.mu held.
func (c *clientConn) usableLocked() bool {
	return !c.dead && c.nextID < math.MaxInt32
}

// roomLocked reports whether one more stream fits under the peer's limit
// beside the open streams and n other granted slots; c.mu held.
func (c *clientConn) roomLocked(n int) bool {
	return uint64(len(c.streams)+c.unackedResets+n) < uint64(c.maxStreams)
}
