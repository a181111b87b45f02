package h1conn

import (
	"crypto/tls"
	"net"
	"syscall"
)

// The inline write of a small request body known to be in memory
// (writesInline) happens on the caller's goroutine before the response is
// read, so it must never block: a server may answer on the head and read
// the body only after the client has the answer, and a blocked write would
// then hang RoundTrip where net/http, which writes every body on its write
// goroutine, returns the answer. A write to a socket does not block while
// the kernel's send buffer can take it, so each connection writes inline
// only what its socket's send buffer certainly holds; anything larger goes
// to the body writer (asyncbody.go), as a body not in memory does.

// MinInlineWriteBuffer is the smallest write buffer (Transport's
// WriteBufferSize, 4 KiB by default) with which bodies are written inline.
const MinInlineWriteBuffer = 4 << 10

// maxTLSLayers is how many *tls.Conn layers (TLS to a proxy, then TLS to
// the origin inside its tunnel) are unwrapped to reach the socket.
const maxTLSLayers = 2

// boundInline clears o.SyncBody when the request's head (written into
// pc.bw since pc.nwrite was start) and its body are more than pc's socket
// certainly takes at once, or when an earlier request's body may still sit
// in the socket's send queue: the body writer then sends the body, and
// every later use of syncBody in this attempt (Expect: 100-continue, the
// wait for the writer in finish) sees it as any body not written inline. A
// request without a body costs a field test. RoundTrip decides syncBody
// afresh (writesInline) for a body replayed on another connection.
func (pc *Conn) boundInline(o *Outgoing, start int64) {
	if o.Body == nil {
		return
	}
	sentBefore := pc.bodySent
	pc.bodySent = true
	if !o.SyncBody {
		return
	}
	if pc.nwrite-start+int64(pc.bw.Buffered())+o.ContentLength > pc.inlineBound() {
		o.SyncBody = false
		return
	}
	// A server that answered an earlier request before reading its body
	// may not have read it yet; those bytes, still queued, take room the
	// bound counted on (TestInlineLeftoverSendQueue). One ioctl, on
	// a connection that has carried a body before.
	if sentBefore && !pc.inlineQueue.empty() {
		o.SyncBody = false
	}
}

// inlineBound returns the most bytes (request head plus body) pc writes
// inline, reading its socket's send buffer size on the first call only
// (one getsockopt per connection; later calls cost a field load). A
// connection whose socket cannot be reached (a custom DialContext's
// net.Pipe or wrapper, or a platform without getsockopt) gets 0: every
// body it carries goes to the body writer, as in net/http. pc is owned by
// the goroutine running its request, so the cache needs no lock.
func (pc *Conn) inlineBound() int64 {
	if !pc.inlineKnown {
		pc.inlineKnown = true
		rc, layers, ok := socketOf(pc.conn)
		// A write buffer under 4 KiB flushes in pieces small enough that
		// their per-buffer charge fills the send queue before a quarter
		// of it holds data (see InlineBoundFromSendBuffer): no inline body.
		if ok && pc.bw.Size() >= MinInlineWriteBuffer {
			if sndbuf, ok := socketSendBuffer(rc); ok {
				pc.inlineMax = InlineBoundFromSendBuffer(sndbuf, layers)
				pc.inlineQueue = newSendQueue(rc, pc.cfg.SendQueue)
			}
		}
		if hook := pc.cfg.InlineBound; hook != nil {
			hook(pc, pc.inlineMax)
		}
	}
	return pc.inlineMax
}

// InlineBoundFromSendBuffer turns a send buffer size as getsockopt
// SO_SNDBUF reports it into the bytes that can be written without
// blocking into an empty send queue, when the connection's tlsLayers TLS
// layers encrypt them.
//
// Linux doubles the value given to setsockopt(SO_SNDBUF) and reports the
// doubled value, as its allowance for bookkeeping: the queue is charged
// each sk_buff's truesize (the payload plus struct sk_buff, skb_shared_info
// and header room), and tcp_sendmsg blocks once that charge reaches the
// limit. Bytes the peer has acknowledged (received, even if its
// application has not read them) leave the queue. Half the reported value
// is not enough: with the peer's receive window at its minimum, one write
// of half the buffer blocked after 82-95% of it (kernel 6.18, 16-64 KiB
// buffers; writes of 1 to 100 bytes blocked after a quarter of the
// reported size or less). ferry's inline writes go
// through its bufio.Writer, in pieces of the write buffer's size (4 KiB
// by default) or one larger write, so a quarter of the reported size is
// taken. An auto-tuned buffer (no SO_SNDBUF set) starts at twice the
// truesize of the initial congestion window (tcp_sndbuf_expand: about 85
// KB for a 1460-byte MSS, megabytes over loopback) and grows with the
// window; it shrinks only under system-wide TCP memory pressure. The value
// read when the connection is first asked is kept. Other systems report
// the size as set: a quarter of it is a wider margin still.
//
// TLS adds to each record a header, a tag or MAC, and possibly an explicit
// nonce and padding. Go's first records on a connection carry about
// 1.2 KiB (one MSS estimate), later ones more; the overhead is at most
// about 6% of the first (CBC with HMAC-SHA256), less with AEAD ciphers and
// larger records: 1/16 is taken off per TLS layer.
func InlineBoundFromSendBuffer(sndbuf, tlsLayers int) int64 {
	if sndbuf <= 0 {
		return 0
	}
	b := int64(sndbuf) / 4
	for range tlsLayers {
		b -= b / 16
	}
	return b
}

// socketOf returns the raw socket under conn and the number of TLS layers
// above it; ok is false when conn has no socket ferry can reach (not a
// syscall.Conn once TLS is unwrapped).
func socketOf(conn net.Conn) (rc syscall.RawConn, tlsLayers int, ok bool) {
	raw := conn
	for tlsLayers < maxTLSLayers {
		tc, isTLS := raw.(*tls.Conn)
		if !isTLS {
			break
		}
		raw = tc.NetConn()
		tlsLayers++
	}
	sc, isSock := raw.(syscall.Conn)
	if !isSock {
		return nil, 0, false
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return nil, 0, false
	}
	return rc, tlsLayers, true
}
