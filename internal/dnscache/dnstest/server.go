// Package dnstest is a real DNS server on loopback UDP for tests: A and
// AAAA answers from a table, NXDOMAIN for unknown names, query counts, and a
// gate that holds answers back. Only tests import it.
package dnstest

import (
	"context"
	"net"
	"net/netip"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/net/dns/dnsmessage"
)

// Server is a real DNS server on loopback UDP answering A and AAAA
// queries from a table, NXDOMAIN for unknown names, and counting queries.
// Start it with Start; it stops when the test ends.
type Server struct {
	pc   net.PacketConn
	addr string
	done chan struct{}

	// mu guards records, queries and gate.
	mu      sync.Mutex
	records map[string][]netip.Addr // lower-case FQDN -> addresses
	queries map[string]int          // "name TYPE" -> count
	total   int
	written int           // answers written back
	gate    chan struct{} // when non-nil, answers wait until it is closed
}

// Start starts a server on 127.0.0.1 that closes when t ends.
func Start(t testing.TB) *Server {
	t.Helper()
	pc, err := net.ListenPacket("udp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &Server{
		pc:      pc,
		addr:    pc.LocalAddr().String(),
		done:    make(chan struct{}),
		records: make(map[string][]netip.Addr),
		queries: make(map[string]int),
	}
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		s.serve(&wg)
	}()
	t.Cleanup(func() {
		s.OpenGate()
		pc.Close()
		wg.Wait()
	})
	return s
}

// Set makes name (any case, no trailing dot) answer with addrs; no
// addrs means an empty answer, not NXDOMAIN. It creates the name's A and
// AAAA query counters too, so that the server's memory does not grow as
// clients first query the names it knows (tests measuring a client's heap
// would count it).
func (s *Server) Set(name string, addrs ...string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var as []netip.Addr
	for _, a := range addrs {
		as = append(as, netip.MustParseAddr(a))
	}
	fqdn := strings.ToLower(name) + "."
	s.records[fqdn] = as
	for _, qtype := range []string{" A", " AAAA"} {
		if _, ok := s.queries[fqdn+qtype]; !ok {
			s.queries[fqdn+qtype] = 0
		}
	}
}

// Remove makes name unknown again (NXDOMAIN).
func (s *Server) Remove(name string) {
	s.mu.Lock()
	delete(s.records, strings.ToLower(name)+".")
	s.mu.Unlock()
}

// CloseGate makes answers wait until OpenGate. Closing a closed gate does
// nothing (replacing it would strand the answers already waiting).
func (s *Server) CloseGate() {
	s.mu.Lock()
	if s.gate == nil {
		s.gate = make(chan struct{})
	}
	s.mu.Unlock()
}

// OpenGate releases the answers held since CloseGate.
func (s *Server) OpenGate() {
	s.mu.Lock()
	if s.gate != nil {
		close(s.gate)
		s.gate = nil
	}
	s.mu.Unlock()
}

// Count returns the queries received for name of type qtype ("A", "AAAA").
func (s *Server) Count(name, qtype string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.queries[strings.ToLower(name)+". "+qtype]
}

// AnsweredAll opens the gate and waits until every query received so far
// has its answer written, so no resolver goroutine is left waiting on a
// query the closing server would drop.
func (s *Server) AnsweredAll(t testing.TB) {
	t.Helper()
	s.OpenGate()
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(time.Millisecond) {
		s.mu.Lock()
		done := s.written >= s.total
		s.mu.Unlock()
		if done {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("DNS server: answers not written within 10s")
		}
	}
}

// AwaitQueries waits until the server has received n queries for name of
// type qtype.
func (s *Server) AwaitQueries(t testing.TB, name, qtype string, n int) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); s.Count(name, qtype) < n; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("DNS server: %d %s queries for %s, want %d", s.Count(name, qtype), qtype, name, n)
		}
	}
}

// TotalQueries returns the number of queries received.
func (s *Server) TotalQueries() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.total
}

func (s *Server) serve(wg *sync.WaitGroup) {
	buf := make([]byte, 1500)
	for {
		n, from, err := s.pc.ReadFrom(buf)
		if err != nil {
			return
		}
		req := append([]byte(nil), buf[:n]...)
		wg.Add(1)
		go func() {
			defer wg.Done()
			if resp := s.answer(req); resp != nil {
				if _, err := s.pc.WriteTo(resp, from); err == nil {
					s.mu.Lock()
					s.written++
					s.mu.Unlock()
				}
			}
		}()
	}
}

func (s *Server) answer(req []byte) []byte {
	var p dnsmessage.Parser
	h, err := p.Start(req)
	if err != nil {
		return nil
	}
	q, err := p.Question()
	if err != nil {
		return nil
	}
	name := strings.ToLower(q.Name.String())
	qtype := strings.TrimPrefix(q.Type.String(), "Type")
	s.mu.Lock()
	s.queries[name+" "+qtype]++
	s.total++
	addrs, known := s.records[name]
	gate := s.gate
	s.mu.Unlock()
	if gate != nil {
		<-gate
	}
	rh := dnsmessage.Header{ID: h.ID, Response: true, RecursionDesired: h.RecursionDesired, RecursionAvailable: true, Authoritative: true}
	if !known {
		rh.RCode = dnsmessage.RCodeNameError
	}
	b := dnsmessage.NewBuilder(nil, rh)
	b.EnableCompression()
	if b.StartQuestions() != nil || b.Question(q) != nil || b.StartAnswers() != nil {
		return nil
	}
	rrh := dnsmessage.ResourceHeader{Name: q.Name, Class: dnsmessage.ClassINET, TTL: 60}
	for _, a := range addrs {
		switch {
		case q.Type == dnsmessage.TypeA && a.Is4():
			if b.AResource(rrh, dnsmessage.AResource{A: a.As4()}) != nil {
				return nil
			}
		case q.Type == dnsmessage.TypeAAAA && a.Is6():
			if b.AAAAResource(rrh, dnsmessage.AAAAResource{AAAA: a.As16()}) != nil {
				return nil
			}
		}
	}
	out, err := b.Finish()
	if err != nil {
		return nil
	}
	return out
}

// Resolver returns a pure-Go resolver that sends every query to s.
func (s *Server) Resolver() *net.Resolver {
	return ResolverFor(s.addr)
}

// ResolverFor returns a pure-Go resolver sending every query to the UDP
// address addr.
func ResolverFor(addr string) *net.Resolver {
	return &net.Resolver{
		PreferGo: true,
		Dial: func(ctx context.Context, network, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "udp4", addr)
		},
	}
}
