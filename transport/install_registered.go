package transport

import (
	"crypto/tls"
	"fmt"
	"net/http"
	"reflect"
	"slices"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"
)

// Adoption through net/http's RegisterProtocol: Install registers an
// adoption for "https" and "http" on http.DefaultTransport, which stays an
// *http.Transport. net/http hands each request for those schemes to the
// adoption first; the adoption sends it with a ferry Transport built from
// std's settings as they are now (after undo, with a net/http clone of
// std), and returns http.ErrSkipAltProtocol, so that net/http sends it
// itself, only before the first install.
//
// The registered value is registeredAdoption, a struct with one exported
// field whose type has CloseIdleConnections: net/http (1.26 and 1.27)
// takes such a value, registered for "https" before the transport's first
// use, for an HTTP/2 implementation of the caller's. It then neither
// configures its bundled HTTP/2 (which would register "https" itself,
// fail, and log "Error enabling Transport HTTP/2 support") nor leaves
// CloseIdleConnections to itself: the transport's CloseIdleConnections
// calls the field's, which closes ferry's idle connections.

// adoption routes the requests of one *http.Transport (std) to a ferry
// Transport built from std's current settings, or, after undo, to a
// net/http Transport with them.
type adoption struct {
	std *http.Transport
	cur atomic.Pointer[adopted] // nil until the first install: decline all
	// swap guards the replacement of cur (by a Transport built for changed
	// settings, by Install, by undo), so that one replacement wins; a
	// Transport is built before swap is taken. Lock order: swap, then a
	// lineage's mu.
	swap sync.Mutex
	// firstUse runs net/http's first-use protocol setup (firstUsed) once.
	firstUse sync.Once
	// fixedProtos is the protocol set of std's first use; nil before it.
	fixedProtos atomic.Pointer[protoSet]
}

// adopted is what serves std's requests, and std's settings it was built
// from: a ferry Transport (t), or after undo a net/http one (nh).
type adopted struct {
	t    *Transport
	nh   *http.Transport
	seen stdSnapshot
}

// registeredAdoption is what is registered with RegisterProtocol; see the
// comment at the top of the file for why it has exactly one exported
// field.
type registeredAdoption struct{ Adoption *adoption }

func (r registeredAdoption) RoundTrip(req *http.Request) (*http.Response, error) {
	return r.Adoption.RoundTrip(req)
}

// RoundTrip sends req with ferry (or, after undo, with net/http). A
// request that finds std's settings changed since the serving Transport
// was built is sent by one built from the new settings (current).
// Requests net/http keeps to itself never get here (an https WebSocket
// upgrade goes over its HTTP/1 path directly); an http:// Upgrade or
// CONNECT request does, and ferry sends it over HTTP/1.1 as net/http
// would.
func (a *adoption) RoundTrip(req *http.Request) (*http.Response, error) {
	c := a.cur.Load()
	if c == nil || !c.seen.matches(a.std) {
		if c = a.current(); c == nil {
			return nil, http.ErrSkipAltProtocol
		}
	}
	if c.nh != nil {
		return c.nh.RoundTrip(req)
	}
	a.firstUse.Do(func() { a.firstUsed(c.t) })
	return c.t.RoundTrip(req)
}

// current returns what serves std's requests with its settings as they
// are now, building it and putting it in place of the one in use when
// they changed (the replaced one's idle connections are closed, see
// adopted.closeIdle), or nil
// before Install. Requests that see a change at the same moment may each
// build one; only the first put in place is used, the others were never
// used and hold nothing.
func (a *adoption) current() *adopted {
	for {
		c := a.cur.Load()
		if c == nil || c.seen.matches(a.std) {
			return c
		}
		var next *adopted
		if c.nh != nil {
			next = a.buildNetHTTP()
		} else {
			next = a.build(c.t.line)
		}
		if a.replace(c, next) {
			return next
		}
	}
}

// replace puts next in place of old unless something else replaced old
// first, then closes old's idle connections; it reports whether it did.
func (a *adoption) replace(old, next *adopted) bool {
	a.swap.Lock()
	ok := a.cur.Load() == old
	if ok {
		a.cur.Store(next)
		if next.t != nil && old != nil && old.t != nil && next.t.line == old.t.line {
			old.t.line.push(next.t)
		}
	}
	a.swap.Unlock()
	if ok && old != nil {
		old.closeIdle()
	}
	return ok
}

// closeIdle closes the idle connections of c's Transport; a ferry
// Transport also closes its HTTP/1.1 connections in use when their
// requests end (no request asks it for one any more), and its HTTP/2
// ones once idle for IdleConnTimeout.
func (c *adopted) closeIdle() {
	if c.nh != nil {
		c.nh.CloseIdleConnections()
	} else {
		c.t.CloseIdleConnections()
	}
}

// build makes a ferry Transport from std's settings for the lineage line,
// with std's settings as they were read before the copy (if a field
// changes in between, the next request sees a difference and builds
// again).
func (a *adoption) build(line *lineage) *adopted {
	seen := snapshotOf(a.std)
	// The TLS config is shared, not cloned as From does: ferry, like
	// net/http, clones it for every connection, so a program that changes
	// it in place (RootCAs, InsecureSkipVerify, Certificates...) is obeyed
	// by both. ALPN (NextProtos) is read once, when t is first used. Not
	// reading it here also keeps a Transport built while another request
	// runs firstUsed from racing with its write.
	t := fromSharingTLS(a.std)
	dropStockDialer(t, a.std)
	t.fixedProtos = a.fixedProtos.Load()
	t.line = line
	return &adopted{t: t, seen: seen}
}

// buildNetHTTP makes a net/http Transport with std's settings (its
// Clone): what serves std's requests after undo. std itself cannot: with
// its "https" registered net/http would give it no HTTP/2 (see the top
// of the file), and would offer "h2" (NextProtos, see firstUsed) with no
// HTTP/2 to speak it. The clone, used first here, configures net/http's
// HTTP/2 as std would have. Its TLS config is a copy (net/http's first
// use writes NextProtos, which ferry's connections may be reading), so a
// config changed in place after undo is not seen (one assigned is).
func (a *adoption) buildNetHTTP() *adopted {
	seen := snapshotOf(a.std)
	return &adopted{nh: a.std.Clone(), seen: seen}
}

// firstUsed does to std what net/http does at a transport's first use,
// with t, the Transport serving it then, built from its settings:
// net/http fixes the protocols it will use (later changes of Protocols,
// ForceAttemptHTTP2 or the dialers do not turn HTTP/2 on or off), and,
// with HTTP/2 on, adds "h2" and "http/1.1" to TLSClientConfig.NextProtos.
// A TLSClientConfig set after that offers only the NextProtos it has,
// so a config without any gets HTTP/1.1. Transports built from then on
// (build) follow the same rules.
func (a *adoption) firstUsed(t *Transport) {
	t.init()
	ps := t.h2.protos
	a.fixedProtos.Store(&ps)
	if _, userH2 := ps.nextProto["h2"]; userH2 || (!ps.h2 && !ps.h2c) {
		return // net/http leaves the config alone
	}
	if cfg := a.std.TLSClientConfig; cfg != nil {
		// The Transports of the lineage that have not been initialised
		// yet (the one replaced, in a concurrent Stats call) read it in
		// computeProtocols.
		adoptedNextProtosMu.Lock()
		cfg.NextProtos = netHTTPNextProtos(cfg.NextProtos, ps.h1, ps.h2)
		adoptedNextProtosMu.Unlock()
	}
}

// adoptedNextProtosMu guards the NextProtos of the TLS configs Install's
// adoptions share with http.DefaultTransport, between firstUsed's write and
// the reads of the lineage's Transports initialising (computeProtocols).
// A request's own dials read the config only after firstUsed returned.
var adoptedNextProtosMu sync.Mutex

// netHTTPNextProtos is the ALPN list net/http's HTTP/2 setup leaves in a
// TLS config: "h2" put first and "http/1.1" last when missing, then the
// protocols not in use removed.
func netHTTPNextProtos(given []string, h1, h2 bool) []string {
	p := slices.Clone(given)
	if !slices.Contains(p, "h2") {
		p = append([]string{"h2"}, p...)
	}
	if !slices.Contains(p, "http/1.1") {
		p = append(p, "http/1.1")
	}
	return slices.DeleteFunc(p, func(s string) bool {
		return (s == "h2" && !h2) || (s == "http/1.1" && !h1)
	})
}

// CloseIdleConnections closes the idle connections of what serves std's
// requests (every ferry Transport of the lineage); std's
// CloseIdleConnections calls it. Like any call of std's
// CloseIdleConnections without ferry, it is std's first use if no request
// came before.
func (a *adoption) CloseIdleConnections() {
	c := a.current()
	switch {
	case c == nil:
	case c.nh != nil:
		c.nh.CloseIdleConnections()
	default:
		a.firstUse.Do(func() { a.firstUsed(c.t) })
		c.t.line.closeIdle()
	}
}

// lineage is the ferry Transports one Install put behind an adopted
// transport: the first one, and one more each time the program changed
// the adopted transport's settings. Stats of any of them covers all.
type lineage struct {
	mu sync.Mutex // guards members and folded
	// members holds the Transport in use first, then replaced ones that
	// still had connections when Stats last looked.
	members []*Transport
	// folded sums the counters of replaced Transports Stats found without
	// connections, dropped from members.
	folded Stats
}

// push makes next the lineage's Transport in use, keeping the others.
func (l *lineage) push(next *Transport) {
	l.mu.Lock()
	l.members = slices.Insert(l.members, 0, next)
	l.mu.Unlock()
}

// snapshot returns a copy of the members and the folded counters.
func (l *lineage) snapshot() ([]*Transport, Stats) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.members), l.folded
}

// closeIdle closes the idle connections of every member.
func (l *lineage) closeIdle() {
	members, _ := l.snapshot()
	for _, t := range members {
		t.CloseIdleConnections()
	}
}

// stats sums the members' Stats and the folded counters, then folds the
// replaced members that have no connection left (their counters stay in
// the sum; their gauges are zero or, for the DNS and Alt-Svc caches,
// gone with them).
func (l *lineage) stats() Stats {
	members, st := l.snapshot()
	var done []*Transport
	var doneStats []Stats
	for i, t := range members {
		ts := t.ownStats()
		addStats(&st, ts)
		if i > 0 && ts.Conns.OpenH1 == 0 && ts.Conns.OpenH2 == 0 && ts.Conns.OpenH3 == 0 {
			done = append(done, t)
			doneStats = append(doneStats, ts)
		}
	}
	if len(done) > 0 {
		l.mu.Lock()
		for i, t := range done {
			if j := slices.Index(l.members, t); j > 0 {
				l.members = slices.Delete(l.members, j, j+1)
				ts := doneStats[i]
				ts.DNS.Entries, ts.AltSvc.Origins = 0, 0
				addStats(&l.folded, ts)
			}
		}
		l.mu.Unlock()
	}
	return st
}

// addStats adds every number of src to dst's.
func addStats(dst *Stats, src Stats) {
	addNumbers(reflect.ValueOf(dst).Elem(), reflect.ValueOf(src))
}

func addNumbers(d, s reflect.Value) {
	for i := range d.NumField() {
		f := d.Field(i)
		switch f.Kind() {
		case reflect.Struct:
			addNumbers(f, s.Field(i))
		case reflect.Int, reflect.Int64:
			f.SetInt(f.Int() + s.Field(i).Int())
		case reflect.Uint64:
			f.SetUint(f.Uint() + s.Field(i).Uint())
		default:
			panic("transport: Stats field of kind " + f.Kind().String())
		}
	}
}

// adoptions holds the adoption registered on each *http.Transport Install
// has seen as http.DefaultTransport: a registration cannot be undone, so
// a later Install on the same transport reuses it.
var adoptions struct {
	mu sync.Mutex // guards m
	m  map[*http.Transport]*adoption
}

// adoptionFor returns std's adoption, registering one for "https" and
// "http" the first time. It fails, registering nothing, when "https" is
// taken: std was used already (net/http's HTTP/2 registered it) or the
// program registered a handler of its own.
func adoptionFor(std *http.Transport) (*adoption, error) {
	adoptions.mu.Lock()
	a := adoptions.m[std]
	var err error
	fresh := false
	if a == nil {
		if a, err = registerAdoption(std); err == nil {
			if adoptions.m == nil {
				adoptions.m = make(map[*http.Transport]*adoption)
			}
			adoptions.m[std] = a
			fresh = true
		}
	}
	adoptions.mu.Unlock()
	if fresh {
		setUpProtocols(std)
	}
	return a, err
}

// registerAdoption registers a new adoption on std for "https" and then
// "http". If "http" is taken (by the program), https requests still go
// through the adoption and http ones stay with net/http. The caller runs
// setUpProtocols(std) next.
func registerAdoption(std *http.Transport) (*adoption, error) {
	if _, ok := std.TLSNextProto["h2"]; ok {
		// std was used (net/http's HTTP/2 holds "https" now) or the
		// program installed an HTTP/2 of its own.
		return nil, fmt.Errorf("ferry: http.Transport has an h2 TLSNextProto entry; its https scheme is taken")
	}
	a := &adoption{std: std}
	if err := registerProtocol(std, "https", registeredAdoption{a}); err != nil {
		return nil, err
	}
	_ = registerProtocol(std, "http", registeredAdoption{a})
	// Stock net/http gives the transport a TLSClientConfig at its first
	// use (configuring HTTP/2); with the adoption registered it does not,
	// so give it the empty one it would have: code doing
	// Clone().TLSClientConfig.InsecureSkipVerify = true must not meet a
	// nil config. An empty config leaves every setting at its default.
	if std.TLSClientConfig == nil && std.ForceAttemptHTTP2 {
		std.TLSClientConfig = &tls.Config{}
	}
	return a, nil
}

// setUpProtocols runs net/http's one-time protocol setup of std now,
// while the registration is fresh: it finds the adoption and routes std's
// CloseIdleConnections to it (not under GODEBUG=http2client=0, with which
// net/http skips that setup). No connection is idle yet, so nothing else
// happens.
func setUpProtocols(std *http.Transport) { std.CloseIdleConnections() }

// registerProtocol is std.RegisterProtocol, with its panic (scheme taken)
// returned as an error.
func registerProtocol(std *http.Transport, scheme string, rt http.RoundTripper) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("ferry: cannot register for %s: %v", scheme, p)
		}
	}()
	std.RegisterProtocol(scheme, rt)
	return nil
}

// install builds a ferry Transport from std's settings and routes std's
// requests to it, returning the Transport and the undo function, which
// hands them to a net/http Transport with std's settings
// (buildNetHTTP) unless another Install took over since.
func (a *adoption) install() (*Transport, func()) {
	line := &lineage{}
	c := a.build(line)
	line.members = []*Transport{c.t}
	for !a.replace(a.cur.Load(), c) {
	}
	return c.t, func() {
		for {
			cur := a.cur.Load()
			if cur == nil || cur.t == nil || cur.t.line != line {
				break
			}
			if a.replace(cur, a.buildNetHTTP()) {
				break
			}
		}
		line.closeIdle()
	}
}

// stdSnapshot is the identity of every exported field of an
// http.Transport (its settings): values for numbers and booleans, the
// pointer for pointers, maps and functions (a function value's pointer is
// that of its closure or method value, so a new DialContext of the same
// method on another net.Dialer differs), plus the length of maps and the
// value of Protocols. Two snapshots compare with ==; taking one is about
// 30 loads. It does not see a map, TLS config or HTTP2Config changed in
// place (see Install's documentation).
// TestStdSnapshotCoversEveryField holds the field list to net/http's.
type stdSnapshot struct {
	proxy, onProxyConnectResponse        unsafe.Pointer
	dialContext, dial                    unsafe.Pointer
	dialTLSContext, dialTLS              unsafe.Pointer
	getProxyConnectHeader                unsafe.Pointer
	tlsClientConfig                      *tls.Config
	tlsHandshakeTimeout, idleConnTimeout time.Duration
	responseHeaderTimeout                time.Duration
	expectContinueTimeout                time.Duration
	disableKeepAlives                    bool
	disableCompression                   bool
	forceAttemptHTTP2                    bool
	maxIdleConns, maxIdleConnsPerHost    int
	maxConnsPerHost                      int
	writeBufferSize, readBufferSize      int
	maxResponseHeaderBytes               int64
	tlsNextProto, proxyConnectHeader     unsafe.Pointer
	tlsNextProtoLen, proxyConnectHdrLen  int
	http2                                *http.HTTP2Config
	protocols                            *http.Protocols
	protocolsValue                       http.Protocols
}

// snapshotOf takes the snapshot of t's settings.
func snapshotOf(t *http.Transport) stdSnapshot {
	s := stdSnapshot{
		proxy:                  funcID(&t.Proxy),
		onProxyConnectResponse: funcID(&t.OnProxyConnectResponse),
		dialContext:            funcID(&t.DialContext),
		dial:                   funcID(&t.Dial),
		dialTLSContext:         funcID(&t.DialTLSContext),
		dialTLS:                funcID(&t.DialTLS),
		getProxyConnectHeader:  funcID(&t.GetProxyConnectHeader),
		tlsClientConfig:        t.TLSClientConfig,
		tlsHandshakeTimeout:    t.TLSHandshakeTimeout,
		idleConnTimeout:        t.IdleConnTimeout,
		responseHeaderTimeout:  t.ResponseHeaderTimeout,
		expectContinueTimeout:  t.ExpectContinueTimeout,
		disableKeepAlives:      t.DisableKeepAlives,
		disableCompression:     t.DisableCompression,
		forceAttemptHTTP2:      t.ForceAttemptHTTP2,
		maxIdleConns:           t.MaxIdleConns,
		maxIdleConnsPerHost:    t.MaxIdleConnsPerHost,
		maxConnsPerHost:        t.MaxConnsPerHost,
		writeBufferSize:        t.WriteBufferSize,
		readBufferSize:         t.ReadBufferSize,
		maxResponseHeaderBytes: t.MaxResponseHeaderBytes,
		tlsNextProto:           *(*unsafe.Pointer)(unsafe.Pointer(&t.TLSNextProto)),
		tlsNextProtoLen:        len(t.TLSNextProto),
		proxyConnectHeader:     *(*unsafe.Pointer)(unsafe.Pointer(&t.ProxyConnectHeader)),
		proxyConnectHdrLen:     len(t.ProxyConnectHeader),
		http2:                  t.HTTP2,
		protocols:              t.Protocols,
	}
	if t.Protocols != nil {
		s.protocolsValue = *t.Protocols
	}
	return s
}

// matches reports whether t's settings are those s was taken from; it is
// snapshotOf(t) == s without building the snapshot, stopping at the first
// difference.
func (s *stdSnapshot) matches(t *http.Transport) bool {
	return s.proxy == funcID(&t.Proxy) &&
		s.dialContext == funcID(&t.DialContext) &&
		s.tlsClientConfig == t.TLSClientConfig &&
		s.onProxyConnectResponse == funcID(&t.OnProxyConnectResponse) &&
		s.dial == funcID(&t.Dial) &&
		s.dialTLSContext == funcID(&t.DialTLSContext) &&
		s.dialTLS == funcID(&t.DialTLS) &&
		s.getProxyConnectHeader == funcID(&t.GetProxyConnectHeader) &&
		s.tlsHandshakeTimeout == t.TLSHandshakeTimeout &&
		s.idleConnTimeout == t.IdleConnTimeout &&
		s.responseHeaderTimeout == t.ResponseHeaderTimeout &&
		s.expectContinueTimeout == t.ExpectContinueTimeout &&
		s.disableKeepAlives == t.DisableKeepAlives &&
		s.disableCompression == t.DisableCompression &&
		s.forceAttemptHTTP2 == t.ForceAttemptHTTP2 &&
		s.maxIdleConns == t.MaxIdleConns &&
		s.maxIdleConnsPerHost == t.MaxIdleConnsPerHost &&
		s.maxConnsPerHost == t.MaxConnsPerHost &&
		s.writeBufferSize == t.WriteBufferSize &&
		s.readBufferSize == t.ReadBufferSize &&
		s.maxResponseHeaderBytes == t.MaxResponseHeaderBytes &&
		s.tlsNextProto == *(*unsafe.Pointer)(unsafe.Pointer(&t.TLSNextProto)) &&
		s.tlsNextProtoLen == len(t.TLSNextProto) &&
		s.proxyConnectHeader == *(*unsafe.Pointer)(unsafe.Pointer(&t.ProxyConnectHeader)) &&
		s.proxyConnectHdrLen == len(t.ProxyConnectHeader) &&
		s.http2 == t.HTTP2 &&
		s.protocols == t.Protocols &&
		(t.Protocols == nil || s.protocolsValue == *t.Protocols)
}

// funcID is the identity of the function value *f: the pointer a func
// value holds (its closure or method value; the same for every use of a
// top-level function), nil for a nil function.
func funcID[F any](f *F) unsafe.Pointer { return *(*unsafe.Pointer)(unsafe.Pointer(f)) }
