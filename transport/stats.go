package transport

import (
	"math/rand/v2"
	"net/http"
	"sync/atomic"

	"golang.org/x/sys/cpu"
)

// Stats is a snapshot of a Transport's counters and gauges, for a service
// to export (see StatsVar). Counters count events since the Transport's
// first use and only grow; gauges ("now") describe the present. The values
// are read one by one without stopping the Transport, so under load they
// need not add up exactly (a request may be counted in Requests before its
// connection shows in Conns).
//
// Taking a snapshot costs a few hundred atomic loads and three short lock
// acquisitions (pool shards, the DNS cache, the Alt-Svc cache); it is
// meant to be called every second, not per request. Built with the
// ferry_nostats tag, the request-path counters (Requests, Conns.Dialled,
// Conns.DialErrors, Conns.OpenH1, AltSvc.Upgrades, AltSvc.Broken) stay
// zero and cost nothing; the pool, DNS and Alt-Svc figures are kept by
// those components and are always there.
type Stats struct {
	Requests RequestStats
	Conns    ConnStats
	Pool     PoolStats
	DNS      DNSStats
	AltSvc   AltSvcStats
}

// RequestStats counts requests that obtained a response, by the protocol
// that carried it, and the attempts that were sent again.
type RequestStats struct {
	H1    uint64 // responses over HTTP/1.x
	H2    uint64 // responses over HTTP/2
	H3    uint64 // responses over HTTP/3
	Other uint64 // responses from a caller's TLSNextProto RoundTripper with another protocol

	// Retries counts attempts that failed in a way that allowed sending
	// the request again (net/http's rules for a reused HTTP/1.1
	// connection, an HTTP/2 stream the server did not process, an HTTP/3
	// request moved to TCP) and were sent again.
	Retries uint64
}

// Total returns the responses over all protocols.
func (r RequestStats) Total() uint64 { return r.H1 + r.H2 + r.H3 + r.Other }

// ConnStats describes TCP and QUIC connections.
type ConnStats struct {
	// Dialled counts TCP connections ferry made for requests (TLS
	// handshake included, direct or through a proxy), whatever protocol
	// they then spoke. QUIC connections are counted in AltSvc.Upgrades.
	Dialled uint64
	// DialErrors counts dials that failed or were abandoned (the request's
	// context ended).
	DialErrors uint64

	OpenH1 int // HTTP/1.1 connections open now, in use or idle
	IdleH1 int // of those, idle in the pool now
	OpenH2 int // shared (HTTP/2) connections in the pool now
	OpenH3 int // HTTP/3 connections in the pool now
}

// PoolStats are the connection pool's counts (internal/idlepool).
type PoolStats struct {
	Hits   uint64 // an idle HTTP/1.1 connection was reused
	Misses uint64 // none was idle: the request dialled (or joined a dial)

	SharedHits   uint64 // a stream was reserved on a pooled HTTP/2 connection
	SharedMisses uint64 // no pooled HTTP/2 connection had a free stream

	Waits          uint64 // requests that waited for a MaxConnsPerHost slot
	CancelledWaits uint64 // of those, the ones whose context ended first

	Evictions   uint64 // idle connections closed to stay within MaxIdleConns
	Expirations uint64 // idle connections closed after IdleConnTimeout
	Rejected    uint64 // connections closed instead of pooled (idle caps)
}

// DNSStats are the DNS cache's counts. They stay zero when ferry does not
// resolve names itself (DialContext or Dial set).
type DNSStats struct {
	Hits        uint64 // lookups answered from the cache
	Misses      uint64 // lookups that asked the resolver
	Coalesced   uint64 // lookups that waited for a concurrent identical one
	StaleServed uint64 // expired answers served while a refresh ran
	Errors      uint64 // lookups that failed
	Entries     int    // names cached now
}

// AltSvcStats describes HTTP/3 discovery.
type AltSvcStats struct {
	Origins int // origins with Alt-Svc information in the cache now

	// Upgrades counts QUIC connections made to an alternative an origin
	// advertised: each one moves that origin's requests to HTTP/3.
	Upgrades uint64
	// Broken counts QUIC dials that failed, and HTTP/3 connections whose
	// network path was judged dead (their packets went unacknowledged),
	// each marking its alternative broken (requests then use TCP while it
	// backs off).
	Broken uint64
	// HeadStartWaits counts requests that waited for a QUIC dial in
	// progress (at most the head start) before using a connection.
	HeadStartWaits uint64
}

// Protocols of RequestStats, as indexes of the request counters.
const (
	protoH1 = iota
	protoH2
	protoH3
	protoOther
	numProtos
)

// statShards spreads the per-request counters over cache lines so that
// requests on different cores do not fight over one line.
const statShards = 8

// statShard is one cache line (padded on both sides) of request counters.
type statShard struct {
	_        cpu.CacheLinePad
	requests [numProtos]atomic.Uint64
	_        cpu.CacheLinePad
}

// transportStats holds the counters the request path writes. Everything
// else Stats reports is read from the components that keep it.
type transportStats struct {
	shards     [statShards]statShard
	retries    atomic.Uint64
	dialled    atomic.Uint64
	dialErrors atomic.Uint64
	h1Opened   atomic.Uint64 // HTTP/1.1 connections handed to requests after a dial
	h1Closed   atomic.Uint64 // HTTP/1.1 connections closed (h1Conn close paths)
	upgrades   atomic.Uint64
	broken     atomic.Uint64
}

// countRequest counts a response obtained over proto. The shard is picked
// at random (the runtime's per-thread generator: no shared state, but
// ~30 ns in a profile; HTTP/1.1 uses countRequestOn instead).
func (s *transportStats) countRequest(proto int) {
	if !countStats {
		return
	}
	s.shards[rand.Uint32()%statShards].requests[proto].Add(1)
}

// newStatShard picks the counter shard of a new HTTP/1.1 connection.
func newStatShard() uint8 { return uint8(rand.Uint32() % statShards) }

// countRequestOn is countRequest for a request on an HTTP/1.1 connection,
// on that connection's shard (newStatShard). A connection carries one
// request at a time, so concurrent requests still spread over the shards,
// without drawing a random number per request (about 30 ns in a profile of
// BenchmarkRoundTripInMemory).
func (s *transportStats) countRequestOn(proto int, shard uint8) {
	if !countStats {
		return
	}
	s.shards[shard%statShards].requests[proto].Add(1)
}

// countResponse counts resp by the protocol it reports: a shared
// connection is HTTP/2 or a caller's TLSNextProto RoundTripper.
func (s *transportStats) countResponse(resp *http.Response) {
	if !countStats {
		return
	}
	switch resp.ProtoMajor {
	case 1:
		s.countRequest(protoH1)
	case 2:
		s.countRequest(protoH2)
	case 3:
		s.countRequest(protoH3)
	default:
		s.countRequest(protoOther)
	}
}

func (s *transportStats) countRetry() {
	if countStats {
		s.retries.Add(1)
	}
}

// countDial counts a successful TCP dial; h1 says the connection speaks
// HTTP/1.1 (an HTTP/2 one is counted by the pool as shared).
func (s *transportStats) countDial(h1 bool) {
	if !countStats {
		return
	}
	s.dialled.Add(1)
	if h1 {
		s.h1Opened.Add(1)
	}
}

func (s *transportStats) countDialError() {
	if countStats {
		s.dialErrors.Add(1)
	}
}

func (s *transportStats) countH1Closed() {
	if countStats {
		s.h1Closed.Add(1)
	}
}

func (s *transportStats) countAltSvcUpgrade() {
	if countStats {
		s.upgrades.Add(1)
	}
}

func (s *transportStats) countBroken() {
	if countStats {
		s.broken.Add(1)
	}
}

// Stats returns a snapshot of t's counters; see Stats for what each means
// and what it costs. It may be called at any time from any goroutine,
// also before t's first request (everything is zero then).
//
// For the Transport Install put behind http.DefaultTransport, the figures
// cover every Transport built for that Install: the first, and those
// built when the program changed http.DefaultTransport's settings.
func (t *Transport) Stats() Stats {
	if t.line != nil {
		return t.line.stats()
	}
	return t.ownStats()
}

// ownStats is Stats of t alone.
func (t *Transport) ownStats() Stats {
	t.init()
	var st Stats
	s := &t.stats
	for i := range s.shards {
		r := &s.shards[i].requests
		st.Requests.H1 += r[protoH1].Load()
		st.Requests.H2 += r[protoH2].Load()
		st.Requests.H3 += r[protoH3].Load()
		st.Requests.Other += r[protoOther].Load()
	}
	st.Requests.Retries = s.retries.Load()

	ps := t.pool.Stats()
	closed := s.h1Closed.Load()
	opened := s.h1Opened.Load()
	st.Conns = ConnStats{
		Dialled:    s.dialled.Load(),
		DialErrors: s.dialErrors.Load(),
		IdleH1:     ps.Idle,
		OpenH2:     ps.Shared,
	}
	if opened > closed { // read apart: a close may be seen before its open
		st.Conns.OpenH1 = int(opened - closed)
	}
	if st.Conns.OpenH1 < st.Conns.IdleH1 {
		st.Conns.OpenH1 = st.Conns.IdleH1
	}
	st.Pool = PoolStats{
		Hits:           ps.Hits,
		Misses:         ps.Misses,
		SharedHits:     ps.SharedHits,
		SharedMisses:   ps.SharedMisses,
		Waits:          ps.Waits,
		CancelledWaits: ps.CancelledWaits,
		Evictions:      ps.Evictions,
		Expirations:    ps.Expirations + ps.SharedExpired,
		Rejected:       ps.Rejected,
	}
	if c := t.dialer.DNS; c != nil {
		ds := c.Stats()
		st.DNS = DNSStats{
			Hits:        ds.Hits,
			Misses:      ds.Misses,
			Coalesced:   ds.Coalesced,
			StaleServed: ds.StaleServed,
			Errors:      ds.Errors,
			Entries:     ds.Entries,
		}
	}
	h := t.h3init()
	hs := h.pool.Stats()
	st.Conns.OpenH3 = hs.Shared
	st.AltSvc = AltSvcStats{
		Origins:        h.cache.Len(),
		Upgrades:       s.upgrades.Load(),
		Broken:         s.broken.Load(),
		HeadStartWaits: uint64(h.waits.Load()),
	}
	return st
}
