package transport

import (
	"sort"
	"time"

	"github.com/ferryhttp/ferry/internal/h3conn"
	"github.com/ferryhttp/ferry/internal/idlepool"
)

// Idle HTTP/3 connections under MaxIdleConns and MaxIdleConnsPerHost.
//
// An HTTP/3 connection without a request in flight counts as idle, with
// the idle TCP connections, against the Transport's idle limits:
//
//   - per host: the idle HTTP/3 connections of an origin plus the idle
//     TCP connections of its TCP key stay within MaxIdleConnsPerHost (0
//     means 2, negative keeps none). Beyond it, the origin's idle TCP
//     connections are closed first (the origin's requests go over HTTP/3
//     while it works, so they are the ones it no longer uses), then its
//     oldest idle HTTP/3 ones;
//   - over all hosts: idle HTTP/3 plus idle TCP connections stay within
//     MaxIdleConns (0: no limit, negative: none kept). Beyond it the idle
//     TCP connections of origins that have an HTTP/3 connection are closed
//     first, for the same reason, then the oldest idle HTTP/3 connections,
//     whatever their origin; the TCP pool enforces the limit on its own
//     connections as before.
//
// The limits are applied when an HTTP/3 connection's last stream is given
// back (h3conn.Config.OnIdle), when a dial adds a connection (which is
// then spared: it is idle only until the requests waiting for it take it)
// and, for MaxIdleConns, when a TCP connection goes idle while HTTP/3
// connections exist. A connection is closed only if it is still idle
// (CloseIfIdle), so a request that reserved a stream meanwhile keeps it.
// IdleConnTimeout is applied by the HTTP/3 pool, as before.

// maxIdlePerHost is MaxIdleConnsPerHost as the TCP pool applies it.
func (t *Transport) maxIdlePerHost() int {
	switch n := t.MaxIdleConnsPerHost; {
	case n == 0:
		return idlepool.DefaultMaxIdlePerKey
	case n < 0:
		return 0
	default:
		return n
	}
}

// h3WentIdle runs when c's last stream was given back.
func (t *Transport) h3WentIdle(h *h3Client, c *h3conn.Conn) {
	h.mu.Lock()
	e, ok := h.conns[c]
	n := h.perTCP[e.tcp]
	h.mu.Unlock()
	if ok {
		t.trimIdleH3(h, e.tcp, n, nil)
	}
}

// h3AfterTCPIdle runs when an HTTP/1.1 connection went idle: with
// MaxIdleConns and HTTP/3 connections open, the idle HTTP/3 ones beyond the
// limit are closed. Otherwise it costs a load or two.
func (t *Transport) h3AfterTCPIdle() {
	if t.MaxIdleConns == 0 || t.h3.live.Load() == 0 {
		return
	}
	t.trimIdleH3(&t.h3, connKey{}, 0, nil)
}

// idleH3 is an idle HTTP/3 connection considered by trimIdleH3.
type idleH3 struct {
	c     *h3conn.Conn
	e     h3Conn
	since time.Time
}

// trimIdleH3 applies the idle limits: the per-host one to the origin of TCP
// key tcp, which has hostConns HTTP/3 connections (0: skip it), and
// MaxIdleConns. keep (may be nil) is never closed.
func (t *Transport) trimIdleH3(h *h3Client, tcp connKey, hostConns int, keep *h3conn.Conn) {
	maxHost, maxAll := t.maxIdlePerHost(), t.MaxIdleConns
	live := int(h.live.Load())
	// Cheap bounds first, counting every HTTP/3 connection, idle or not.
	overHost := hostConns > 0 && hostConns+t.pool.IdleLen(tcp) > maxHost
	overAll := maxAll < 0 || maxAll > 0 && live+t.pool.IdleTotal() > maxAll
	if !overHost && !overAll {
		return
	}
	h.mu.Lock()
	idle := make([]idleH3, 0, len(h.conns))
	served := make(map[connKey]bool) // TCP keys of origins served over HTTP/3
	for c, e := range h.conns {
		if !c.Usable() {
			continue
		}
		served[e.tcp] = true
		if since, ok := c.IdleSince(); ok {
			idle = append(idle, idleH3{c: c, e: e, since: since})
		}
	}
	h.mu.Unlock()
	sort.Slice(idle, func(i, j int) bool { return idle[i].since.Before(idle[j].since) })

	victim := make(map[*h3conn.Conn]bool)
	if overHost {
		var mine []idleH3
		for _, x := range idle {
			if x.e.tcp == tcp {
				mine = append(mine, x)
			}
		}
		excess := len(mine) + t.pool.IdleLen(tcp) - maxHost
		if len(mine) > 0 {
			excess = t.closeIdleTCP(tcp, excess)
		}
		for _, x := range mine {
			if excess <= 0 {
				break
			}
			if x.c != keep {
				victim[x.c] = true
				excess--
			}
		}
	}
	if maxAll != 0 {
		excess := len(idle) - len(victim) + t.pool.IdleTotal() - max(maxAll, 0)
		for k := range served {
			if excess <= 0 {
				break
			}
			excess = t.closeIdleTCP(k, excess)
		}
		for _, x := range idle {
			if excess <= 0 {
				break
			}
			if x.c != keep && !victim[x.c] {
				victim[x.c] = true
				excess--
			}
		}
	}
	if len(victim) == 0 {
		return
	}
	var gone []*h3conn.Conn
	for _, x := range idle {
		if victim[x.c] && x.c.CloseIfIdle() {
			h.pool.RemoveShared(x.e.key, x.c)
			gone = append(gone, x.c)
		}
	}
	h.mu.Lock()
	for _, c := range gone {
		h.dropConnLocked(c)
	}
	h.mu.Unlock()
	t.quicGone(h, gone)
}

// closeIdleTCP closes up to n idle TCP connections of key and returns n
// less the number closed.
func (t *Transport) closeIdleTCP(key connKey, n int) int {
	for ; n > 0; n-- {
		pc, _, ok := t.pool.TryGet(key)
		if !ok {
			break
		}
		pc.CloseAndRelease()
	}
	return n
}
