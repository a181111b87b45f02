package h2conn

import "sync"

// A stream's received body waits in cs.buf (unread bytes buf[off:]) until
// the caller reads it. The buffer grows when DATA arrives faster than the
// caller reads, as it does for large responses with many streams in
// flight. Small buffers are kept per connection (spareBufLocked); buffers
// of 16 to 128 KiB come from process-wide pools by size, so a large
// response's buffer is neither allocated nor zeroed anew each time, and
// the garbage collector does not run for each few dozen of them. A buffer
// is never seen outside the stream (Read copies out of it), so it may be
// reused as soon as the stream lets it go.

// Pooled buffer sizes: 16, 32, 64 and 128 KiB. A connection keeps as
// many smaller spares as maxFreeBufs (one per stream in flight, up to a
// server's usual SETTINGS_MAX_CONCURRENT_STREAMS of 100 or more, so that
// small responses on a busy connection allocate no buffer either), no
// more than maxFreeBytes between them.
const (
	minPooledBuf = 16 << 10
	maxPooledBuf = 128 << 10
	maxFreeBufs  = 128
	maxFreeBytes = 256 << 10
)

// The pools hold pointers to arrays, so that Put and Get allocate nothing.
var (
	recvPool16  sync.Pool // *[16 << 10]byte
	recvPool32  sync.Pool // *[32 << 10]byte
	recvPool64  sync.Pool // *[64 << 10]byte
	recvPool128 sync.Pool // *[128 << 10]byte
)

// getPooledBuf returns an empty buffer of the smallest pooled size that
// holds n bytes (minPooledBuf <= n <= maxPooledBuf).
func getPooledBuf(n int) []byte {
	switch {
	case n <= 16<<10:
		if p, ok := recvPool16.Get().(*[16 << 10]byte); ok {
			return p[:0]
		}
		return new([16 << 10]byte)[:0]
	case n <= 32<<10:
		if p, ok := recvPool32.Get().(*[32 << 10]byte); ok {
			return p[:0]
		}
		return new([32 << 10]byte)[:0]
	case n <= 64<<10:
		if p, ok := recvPool64.Get().(*[64 << 10]byte); ok {
			return p[:0]
		}
		return new([64 << 10]byte)[:0]
	default:
		if p, ok := recvPool128.Get().(*[128 << 10]byte); ok {
			return p[:0]
		}
		return new([128 << 10]byte)[:0]
	}
}

// putPooledBuf gives b to its pool if its capacity is exactly a pooled
// size, and reports whether it did; b must not be used afterwards.
func putPooledBuf(b []byte) bool {
	b = b[:cap(b)]
	switch cap(b) {
	case 16 << 10:
		recvPool16.Put((*[16 << 10]byte)(b))
	case 32 << 10:
		recvPool32.Put((*[32 << 10]byte)(b))
	case 64 << 10:
		recvPool64.Put((*[64 << 10]byte)(b))
	case 128 << 10:
		recvPool128.Put((*[128 << 10]byte)(b))
	default:
		return false
	}
	return true
}

// appendBodyLocked adds received body bytes to cs's buffer; c.mu held.
// When they do not fit, the unread bytes move to a larger buffer, sized
// for the rest of the declared body when that is known (so that a
// response's buffer grows once, not by doubling), and the old one is
// let go.
func (c *clientConn) appendBodyLocked(cs *stream, data []byte) {
	if cs.buf == nil {
		cs.buf = c.newBufLocked()
	}
	if len(cs.buf)+len(data) <= cap(cs.buf) {
		cs.buf = append(cs.buf, data...)
		return
	}
	unread := cs.buf[cs.off:]
	need := len(unread) + len(data)
	if need <= cap(cs.buf) {
		// Room once the bytes already read are dropped.
		n := copy(cs.buf[:cap(cs.buf)], unread)
		cs.buf, cs.off = append(cs.buf[:n], data...), 0
		return
	}
	want := need
	if cs.remain > 0 {
		// cs.remain is what the server still has to send (data counted).
		want = int(min(int64(need)+cs.remain, int64(maxPooledBuf)))
		want = max(want, need)
	}
	var nb []byte
	if want >= minPooledBuf && want <= maxPooledBuf {
		nb = getPooledBuf(want)
	} else {
		nb = make([]byte, 0, max(want, 2*cap(cs.buf)))
	}
	nb = append(append(nb, unread...), data...)
	old := cs.buf
	cs.buf, cs.off = nb, 0
	c.spareBufLocked(old)
}

// spareBufLocked keeps buf, whose bytes are no longer needed, for other
// streams: a pooled size goes back to its pool, a smaller one to the
// connection's spares (at most maxFreeBufs of them and maxFreeBytes
// between them); anything else is left to the garbage collector. c.mu
// held.
func (c *clientConn) spareBufLocked(buf []byte) {
	n := cap(buf)
	if n == 0 || putPooledBuf(buf) {
		return
	}
	if n < minPooledBuf && len(c.freeBufs) < maxFreeBufs && c.freeBytes+n <= maxFreeBytes {
		c.freeBufs = append(c.freeBufs, buf[:0])
		c.freeBytes += n
	}
}

// recycleBufLocked lets cs's receive buffer go for other streams: no DATA
// will be appended to it any more (the stream is gone or the peer ended
// it) and its bytes were read or dropped. c.mu held.
func (c *clientConn) recycleBufLocked(cs *stream) {
	buf := cs.buf
	cs.buf, cs.off = nil, 0
	c.spareBufLocked(buf)
}

// newBufLocked returns one of the connection's spare receive buffers, nil
// if it has none; c.mu held.
func (c *clientConn) newBufLocked() []byte {
	n := len(c.freeBufs)
	if n == 0 {
		return nil
	}
	buf := c.freeBufs[n-1]
	c.freeBufs[n-1] = nil
	c.freeBufs = c.freeBufs[:n-1]
	c.freeBytes -= cap(buf)
	return buf
}
