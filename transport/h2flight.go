package transport

import (
	"hash/maphash"
	"sync"
)

// Coalescing the first dials to an origin. Until a connection to a key has
// said which protocol it speaks, concurrent requests that find nothing in
// the pool do not each dial: the first (the leader) dials, the others wait
// for its outcome. If it speaks HTTP/2 they share it (or, if it is full,
// come back and dial again, one leader at a time); if it speaks HTTP/1 or
// the dial fails they dial their own, as net/http's independent dials
// would have. A key whose last connection spoke HTTP/1 is remembered so
// later dials are not held up at all.
//
// The table is consulted only on the dial path (never on a pool hit) and
// is sharded so dials to different origins rarely meet on a lock. It keeps
// an entry per key with a dial in flight, plus one per key known to speak
// HTTP/1 (bounded by the origins the Transport talks to).

// dialOutcome is what a dial for a shared key produced.
type dialOutcome int

const (
	dialFailed dialOutcome = iota
	dialSpokeH1
	dialShared
)

// dialFlight is one dial in flight; done is closed when it ends, after
// shared is set. awaiting is closed (startAwaiting, by the leader) when
// the leader starts waiting for a server's SETTINGS: the followers then
// wait for them too, and bound that by their ResponseHeaderTimeout.
type dialFlight struct {
	done     chan struct{}
	awaiting chan struct{}
	shared   bool // it produced a shared connection
	// awaitingClosed: awaiting was closed. Only the leader touches it.
	awaitingClosed bool
}

// startAwaiting closes f.awaiting once; only f's leader calls it.
func (f *dialFlight) startAwaiting() {
	if !f.awaitingClosed {
		f.awaitingClosed = true
		close(f.awaiting)
	}
}

type flightEntry struct {
	inflight *dialFlight
	spokeH1  bool
}

const flightShards = 16

type flightTable struct {
	seed   maphash.Seed
	once   sync.Once
	shards [flightShards]flightShard
}

type flightShard struct {
	// mu guards m.
	mu sync.Mutex
	m  map[connKey]*flightEntry
	_  [40]byte // keep shards on separate cache lines
}

func (ft *flightTable) shard(key connKey) *flightShard {
	ft.once.Do(func() { ft.seed = maphash.MakeSeed() })
	return &ft.shards[maphash.Comparable(ft.seed, key)%flightShards]
}

// join returns the dial in flight for key and leader == false, or a new
// flight the caller leads (leader == true), or nil when the key is known to
// speak HTTP/1 (dial without waiting).
func (ft *flightTable) join(key connKey) (f *dialFlight, leader bool) {
	s := ft.shard(key)
	s.mu.Lock()
	defer s.mu.Unlock()
	e := s.m[key]
	switch {
	case e == nil:
		if s.m == nil {
			s.m = make(map[connKey]*flightEntry)
		}
		e = &flightEntry{}
		s.m[key] = e
	case e.inflight != nil:
		return e.inflight, false
	case e.spokeH1:
		return nil, false
	}
	e.inflight = &dialFlight{done: make(chan struct{}), awaiting: make(chan struct{})}
	return e.inflight, true
}

// finish ends the leader's flight f with its outcome and wakes the
// followers.
func (ft *flightTable) finish(key connKey, f *dialFlight, out dialOutcome) {
	s := ft.shard(key)
	s.mu.Lock()
	if e := s.m[key]; e != nil && e.inflight == f {
		e.inflight = nil
		ft.recordLocked(s, key, e, out)
	}
	s.mu.Unlock()
	f.shared = out == dialShared
	close(f.done)
}

// record notes the outcome of a dial made without a flight.
func (ft *flightTable) record(key connKey, out dialOutcome) {
	s := ft.shard(key)
	s.mu.Lock()
	e := s.m[key]
	if e == nil && out == dialSpokeH1 {
		if s.m == nil {
			s.m = make(map[connKey]*flightEntry)
		}
		e = &flightEntry{}
		s.m[key] = e
	}
	if e != nil {
		ft.recordLocked(s, key, e, out)
	}
	s.mu.Unlock()
}

func (ft *flightTable) recordLocked(s *flightShard, key connKey, e *flightEntry, out dialOutcome) {
	switch out {
	case dialSpokeH1:
		e.spokeH1 = true
	case dialShared:
		e.spokeH1 = false
	}
	if !e.spokeH1 && e.inflight == nil {
		delete(s.m, key)
	}
}
