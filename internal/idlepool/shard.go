package idlepool

import (
	"math"
	"sync/atomic"
)

// numShards is the number of independently locked parts of a pool (a power
// of two). 64 keeps two requests for different keys on different locks with
// high probability while a scan of every shard (eviction, the timer) stays
// cheap.
const numShards = 64

// noIdle is the watermark of a shard that holds nothing idle.
const noIdle = math.MaxInt64

// idleEntry is one idle exclusive connection and when it went idle (pool
// clock, nanoseconds since the pool was created).
type idleEntry[C Conn] struct {
	c     C
	since int64
}

// keyState is everything the pool knows about one key. It is reached only
// through its shard's table and guarded by that shard's mu.
//
// Layout: a get or put touches the key that a lookup compares and the top
// of the idle stack with the counts, nothing else; what waiting, shared
// connections and more than DefaultMaxIdlePerKey idle connections need is
// behind keyCold. With a one-word connection (an idle entry is two words)
// and a key of 56 bytes the struct is 120 bytes, which the allocator puts
// in its 128-byte size class, whose objects start on a 128-byte boundary,
// so those are two neighbouring cache lines, which Intel's spatial
// prefetcher fetches as a pair (TestKeyStateLayout). With thousands of
// keys, each line not in cache is a memory access, and the smaller the key
// states, the more of them stay in cache: with the cold part inside (192
// bytes), 10,000 keys measured 1.35x one key's get + put, and 1.29x split
// (BenchmarkPool, -cpu 1, parallel, alternated runs). The transport's key
// is 72 bytes, so its key states are 144 bytes and not aligned to pairs of
// lines.
type keyState[K comparable, C Conn] struct {
	key K

	// keyCold holds what a get or put rarely touches; it is allocated
	// when the keyState is (a second allocation) and recycled with it,
	// never nil.
	*keyCold[C]

	// hash is the maphash of key (low bits chose the shard, the rest the
	// table slot); the table keeps a copy next to its pointer for lookups.
	// It sits here, not in keyCold, so that the struct reaches the 128-byte
	// size class for the benchmark's key shape (see above).
	hash uint64

	// top holds the newest idle entries, oldest first, in top[:ntop]; older
	// ones spill into keyCold.spill (idlestack.go).
	top [DefaultMaxIdlePerKey]idleEntry[C]
	// ntop is how many entries of top are in use.
	ntop int32
	// nidle counts the key's idle connections: ntop plus len(spill).
	nidle int32
	// conns counts live connections holding a slot of this key.
	conns int32
	// idleIdx is the index of this key in shard.idleKeys, -1 when nothing
	// of it is idle.
	idleIdx int32
}

// keyCold is the part of a keyState for waiting, shared connections and
// the oldest idle entries of a key with many, guarded by the same shard mu.
type keyCold[C Conn] struct {
	// spill holds a key's oldest idle entries, oldest first, when more
	// than DefaultMaxIdlePerKey are idle (idlestack.go).
	spill []idleEntry[C]

	// waiters are Acquire calls waiting for a slot, first come first
	// served; nil until the key's first wait.
	waiters *waitQueue[C]
	// streamGen counts the moments a shared connection of this key may have
	// gained a free stream (AddShared, StreamReleased); a Turn that saw an
	// older value must look again before it waits. It is never reset, also
	// when the keyState is recycled (a stale Turn then only looks again).
	streamGen uint64
	// nextSeq numbers waiters in arrival order (see waiter.seq).
	nextSeq uint64
	// shared is copy-on-write: a new slice is built on every change, so a
	// reader may keep the header it read under the lock and use it after.
	shared []SharedConn
	// sharedIdx is the index of this key in shard.sharedKeys, -1 when shared is empty.
	sharedIdx int
	// inTable: the keyState is in its shard's table (and not on the free
	// list), so dropIfEmptyLocked, which several slot releases in a row
	// may call for the same state, drops it only once.
	inTable bool
}

func (ks *keyState[K, C]) empty() bool {
	return ks.nidle == 0 && ks.conns == 0 && ks.waiters.len() == 0 && len(ks.shared) == 0
}

// shard is one independently locked part of the pool. Its size is a
// multiple of 64 bytes (TestShardLayout checks it) and the pool allocates
// the shards as one array of an exact size class, so each shard starts a
// cache line; the fields a get or put touches are in its first line.
type shard[K comparable, C Conn] struct {
	// mu guards keys, idleKeys, sharedKeys, free and every keyState reachable
	// from keys. It is never held while a connection method runs. The
	// counters a get or put writes share its cache line, so the line the
	// lock brings to a core is the one the critical section writes.
	mu shardLock
	// watermark is a lower bound on the since of every idle entry in the
	// shard (noIdle when nothing is idle). Written under mu; read without it
	// by the timer and by eviction to choose a shard.
	watermark atomic.Int64
	// idleCount is the number of idle entries; written under mu.
	idleCount atomic.Int64
	hits      atomic.Uint64 // written under mu
	misses    atomic.Uint64 // written under mu
	// sharedCount is the number of shared connections; written under mu.
	sharedCount atomic.Int64
	// (mu is 24 bytes, so these fill the first line: keys starts the second.)

	// Second line: the key table, read on every get and put but written
	// only when a key comes or goes, and the bookkeeping for when a key's
	// idle stack empties or fills.
	keys       keyTable[K, C]
	idleKeys   []*keyState[K, C]
	sharedKeys []*keyState[K, C]

	// free holds emptied keyStates (with their slices) for reuse, so keys that
	// come and go do not allocate each time.
	free []*keyState[K, C]
	_    [24]byte // pad to 192 bytes: the next shard starts a new cache line
}

const maxFreeKeyStates = 32

// countLocked and addLocked change shard counters. Only the shard's lock
// holder writes them, so a load and a store suffice (no locked
// read-modify-write on the request path); readers without the lock still
// see whole values.
func countLocked(a *atomic.Uint64) { a.Store(a.Load() + 1) }

func addLocked(a *atomic.Int64, d int64) { a.Store(a.Load() + d) }

func (s *shard[K, C]) init() {
	s.mu.init()
	s.watermark.Store(noIdle)
}

// lookupLocked returns the state of key (h is its maphash), nil if absent.
func (s *shard[K, C]) lookupLocked(h uint64, key K) *keyState[K, C] {
	return s.keys.get(h, key)
}

// getOrCreateLocked returns the state of key, creating it when absent.
func (s *shard[K, C]) getOrCreateLocked(h uint64, key K) *keyState[K, C] {
	if ks := s.keys.get(h, key); ks != nil {
		return ks
	}
	var ks *keyState[K, C]
	if n := len(s.free); n > 0 {
		ks = s.free[n-1]
		s.free[n-1] = nil
		s.free = s.free[:n-1]
	} else {
		ks = &keyState[K, C]{keyCold: &keyCold[C]{}}
	}
	ks.key = key
	ks.hash = h
	ks.idleIdx = -1
	ks.sharedIdx = -1
	s.keys.insert(ks)
	ks.inTable = true
	return ks
}

// dropIfEmptyLocked forgets a key that holds nothing any more.
func (s *shard[K, C]) dropIfEmptyLocked(ks *keyState[K, C]) {
	if !ks.inTable || !ks.empty() {
		return
	}
	s.keys.remove(ks)
	ks.inTable = false
	var zeroK K
	ks.key = zeroK
	ks.shared = nil
	if len(s.free) < maxFreeKeyStates {
		s.free = append(s.free, ks)
	}
}

// popLocked removes and returns the most recently used idle connection of ks,
// which must have one. The watermark stays a valid lower bound.
func (s *shard[K, C]) popLocked(ks *keyState[K, C]) idleEntry[C] {
	e := ks.popIdle()
	if ks.nidle == 0 {
		s.unlistIdleLocked(ks)
	}
	addLocked(&s.idleCount, -1)
	return e
}

// removeOldestLocked removes the n oldest idle connections of ks,
// appending them to out.
func (s *shard[K, C]) removeOldestLocked(ks *keyState[K, C], n int, out []C) []C {
	out = ks.dropOldestIdle(n, out)
	if ks.nidle == 0 {
		s.unlistIdleLocked(ks)
	}
	addLocked(&s.idleCount, int64(-n))
	return out
}

func (s *shard[K, C]) unlistIdleLocked(ks *keyState[K, C]) {
	i := int(ks.idleIdx)
	last := len(s.idleKeys) - 1
	if i != last {
		moved := s.idleKeys[last]
		s.idleKeys[i] = moved
		moved.idleIdx = int32(i)
	}
	s.idleKeys[last] = nil
	s.idleKeys = s.idleKeys[:last]
	ks.idleIdx = -1
	if len(s.idleKeys) == 0 {
		s.watermark.Store(noIdle)
	}
}

// oldestLocked recomputes the watermark exactly and returns it with the key
// holding the oldest idle connection (nil when nothing is idle).
func (s *shard[K, C]) oldestLocked() (int64, *keyState[K, C]) {
	oldest := int64(noIdle)
	var at *keyState[K, C]
	for _, ks := range s.idleKeys {
		if since := ks.oldestIdle().since; since < oldest {
			oldest, at = since, ks
		}
	}
	s.watermark.Store(oldest)
	return oldest, at
}
