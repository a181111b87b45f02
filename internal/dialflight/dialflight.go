// Package dialflight coalesces the first dials to a key (an origin, with
// its proxy). Until a connection to a key has said which protocol it
// speaks, concurrent requests that find nothing in the pool do not each
// dial: the first (the leader) dials, the others wait for its outcome. If
// it speaks HTTP/2 they share it (or, if it is full, come back and dial
// again, one leader at a time); if it speaks HTTP/1 or the dial fails they
// dial their own, as net/http's independent dials would have. A key whose
// last connection spoke HTTP/1 is remembered so later dials are not held
// up at all.
//
// The table is consulted only on the dial path (never on a pool hit) and
// is sharded so dials to different origins rarely meet on a lock. It keeps
// an entry per key with a dial in flight, plus one per key known to speak
// HTTP/1 (bounded by the origins the transport talks to).
package dialflight

import (
	"hash/maphash"
	"sync"
)

// Outcome is what a dial for a key produced.
type Outcome int

const (
	Failed  Outcome = iota // no connection
	SpokeH1                // an HTTP/1 connection, the dialer's own
	Shared                 // a shared (HTTP/2) connection others may use
)

// Flight is one dial in flight. Done is closed when it ends, after its
// outcome is set (Shared). Awaiting is closed (StartAwaiting, by the
// leader) when the leader starts waiting for a server's SETTINGS: the
// followers then wait for them too, and bound that by their
// ResponseHeaderTimeout.
type Flight struct {
	done     chan struct{}
	awaiting chan struct{}
	shared   bool // it produced a shared connection
	// awaitingClosed: awaiting was closed. Only the leader touches it.
	awaitingClosed bool
}

// Done is closed when the dial ended.
func (f *Flight) Done() <-chan struct{} { return f.done }

// Awaiting is closed when the leader waits for a server's SETTINGS.
func (f *Flight) Awaiting() <-chan struct{} { return f.awaiting }

// Shared reports, once Done is closed, whether the dial produced a shared
// connection.
func (f *Flight) Shared() bool { return f.shared }

// StartAwaiting closes Awaiting once; only f's leader calls it.
func (f *Flight) StartAwaiting() {
	if !f.awaitingClosed {
		f.awaitingClosed = true
		close(f.awaiting)
	}
}

type entry struct {
	inflight *Flight
	spokeH1  bool
}

const shards = 16

// Table is the flights and HTTP/1 memory of a transport's keys. The zero
// value is ready to use.
type Table[K comparable] struct {
	seed   maphash.Seed
	once   sync.Once
	shards [shards]shard[K]
}

type shard[K comparable] struct {
	// mu guards m.
	mu sync.Mutex
	m  map[K]*entry
	_  [40]byte // keep shards on separate cache lines
}

func (ft *Table[K]) shard(key K) *shard[K] {
	ft.once.Do(func() { ft.seed = maphash.MakeSeed() })
	return &ft.shards[maphash.Comparable(ft.seed, key)%shards]
}

// Join returns the dial in flight for key and leader == false, or a new
// flight the caller leads (leader == true), or nil when the key is known to
// speak HTTP/1 (dial without waiting).
func (ft *Table[K]) Join(key K) (f *Flight, leader bool) {
	s := ft.shard(key)
	s.mu.Lock()
	defer s.mu.Unlock()
	e := s.m[key]
	switch {
	case e == nil:
		if s.m == nil {
			s.m = make(map[K]*entry)
		}
		e = &entry{}
		s.m[key] = e
	case e.inflight != nil:
		return e.inflight, false
	case e.spokeH1:
		return nil, false
	}
	e.inflight = &Flight{done: make(chan struct{}), awaiting: make(chan struct{})}
	return e.inflight, true
}

// Finish ends the leader's flight f with its outcome and wakes the
// followers.
func (ft *Table[K]) Finish(key K, f *Flight, out Outcome) {
	s := ft.shard(key)
	s.mu.Lock()
	if e := s.m[key]; e != nil && e.inflight == f {
		e.inflight = nil
		recordLocked(s, key, e, out)
	}
	s.mu.Unlock()
	f.shared = out == Shared
	close(f.done)
}

// Record notes the outcome of a dial made without a flight.
func (ft *Table[K]) Record(key K, out Outcome) {
	s := ft.shard(key)
	s.mu.Lock()
	e := s.m[key]
	if e == nil && out == SpokeH1 {
		if s.m == nil {
			s.m = make(map[K]*entry)
		}
		e = &entry{}
		s.m[key] = e
	}
	if e != nil {
		recordLocked(s, key, e, out)
	}
	s.mu.Unlock()
}

func recordLocked[K comparable](s *shard[K], key K, e *entry, out Outcome) {
	switch out {
	case SpokeH1:
		e.spokeH1 = true
	case Shared:
		e.spokeH1 = false
	}
	if !e.spokeH1 && e.inflight == nil {
		delete(s.m, key)
	}
}
