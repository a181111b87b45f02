package transport

import (
	"errors"
	"net/http"

	"github.com/ferryhttp/ferry/internal/h1conn"
	"github.com/ferryhttp/ferry/internal/idlepool"
)

// h1Conn is an HTTP/1.1 connection (internal/h1conn) as the transport pools
// it: the connection and what the pool, Stats, socket options and
// CancelRequest need to know of it. It is the h1conn.Owner of its Conn.
type h1Conn struct {
	h1conn.Conn
	t         *Transport
	key       connKey
	keyHash   idlepool.KeyHash // t.pool.Hash(key), so a Put does not hash again
	statShard uint8            // the transportStats shard its requests are counted in
	sock      connSocket       // the connection's socket, for requests' socket options
	cancelReg cancelEntry      // the request in flight's CancelRequest registration
}

// newH1Conn makes a dialled connection an HTTP/1.1 connection for key.
func newH1Conn(t *Transport, key connKey, d dialedConn) *h1Conn {
	pc := &h1Conn{t: t, key: key, keyHash: t.pool.Hash(key), statShard: newStatShard()}
	pc.sock.conn = d.conn
	pc.sock.guard = d.guard
	pc.Init(&t.h1cfg, pc, d.conn, d.tlsState)
	return pc
}

// h1Config is the part of t's settings its HTTP/1.1 connections read.
func (t *Transport) h1Config() {
	c := &t.h1cfg
	c.ReadBufferSize = t.ReadBufferSize
	c.WriteBufferSize = t.WriteBufferSize
	c.MaxHeaderBytes = t.maxHeaderBytes()
	c.ResponseHeaderTimeout = t.ResponseHeaderTimeout
	c.ExpectContinueTimeout = t.ExpectContinueTimeout
	c.DisableKeepAlives = t.DisableKeepAlives
	c.DrainTime = t.drainTime
	c.WriteWaited = t.writeWaited
}

var errTooManyIdle = errors.New("http: putIdleConn: too many idle connections for host")

// errCloseIdle is net/http's PutIdleConn error for a connection closed
// because CloseIdleConnections ran while it was in use.
var errCloseIdle = errors.New("http: putIdleConn: CloseIdleConnections was called")

// PutIdle hands the reusable connection back: to the pool (or a request
// waiting for it), or, after CloseIdleConnections with no request asking
// since, closed unless a request waits for it (as net/http). It returns
// net/http's PutIdleConn error when the connection was closed instead.
func (pc *h1Conn) PutIdle() error {
	t := pc.t
	if t.closeIdle.Load() {
		if t.pool.HandToWaiterHashed(pc.key, pc.keyHash, pc) {
			return nil
		}
		pc.CloseAndRelease()
		return errCloseIdle
	}
	kept := t.pool.PutHashed(pc.key, pc.keyHash, pc)
	t.tcpSlotEvent() // idle now, or closed and its slot given back
	if !kept {
		return errTooManyIdle // the pool closed it
	}
	t.h3AfterTCPIdle() // idle HTTP/3 connections count against MaxIdleConns too
	// CloseIdleConnections sets closeIdle before it sweeps the pool: if it
	// is still clear here, that sweep comes after this Put and finds the
	// connection. If it is set now, the sweep may have run before the Put
	// landed: sweep again (rare; whatever is idle now would be closed
	// anyway), on a goroutine of its own: the connection may be handed
	// back under a body's lock, and closing TLS connections can block.
	if t.closeIdle.Load() {
		go t.pool.CloseIdle()
	}
	return nil
}

// Closed counts the closed connection and, when it was out of the pool,
// frees its slot.
func (pc *h1Conn) Closed(release bool) {
	pc.t.stats.countH1Closed()
	if release {
		pc.t.releaseTCPSlot(pc.key)
	}
}

// WatchCancel registers the request in flight for CancelRequest.
func (pc *h1Conn) WatchCancel(req *http.Request, gen uint64) {
	pc.cancelReg.Req, pc.cancelReg.Conn, pc.cancelReg.Gen = req, pc, gen
	pc.t.cancels.Register(&pc.cancelReg)
}

// UnwatchCancel ends the registration WatchCancel made.
func (pc *h1Conn) UnwatchCancel() { pc.t.cancels.Unregister(&pc.cancelReg) }
