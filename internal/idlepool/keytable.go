package idlepool

// keyTable maps keys to their state inside one shard. It is an open-
// addressing hash table with linear probing, indexed by the maphash value
// the pool already computed to choose the shard, so a request hashes its key
// once instead of twice (a Go map would hash it again). Deletion shifts the
// following entries back (no tombstones), so lookups stay short as keys come
// and go. Lookup, insert and delete are O(1) expected; the table doubles
// when three quarters full and never shrinks. Each slot keeps the key's hash
// next to the pointer, so a probe reads only the slot's cache line and
// dereferences a key state only when the full hash matches: with thousands
// of keys, every key state not in cache costs a memory access.
type keyTable[K comparable, C Conn] struct {
	slots []tableSlot[K, C] // len is a power of two; a nil ks is an empty slot
	n     int
}

type tableSlot[K comparable, C Conn] struct {
	hash uint64
	ks   *keyState[K, C]
}

// tableShift drops the hash bits that chose the shard.
const tableShift = 6

func (t *keyTable[K, C]) home(h uint64) int {
	return int((h >> tableShift) & uint64(len(t.slots)-1))
}

func (t *keyTable[K, C]) get(h uint64, key K) *keyState[K, C] {
	if t.n == 0 {
		return nil
	}
	mask := len(t.slots) - 1
	for i := t.home(h); ; i = (i + 1) & mask {
		sl := &t.slots[i]
		if sl.ks == nil {
			return nil
		}
		if sl.hash == h && sl.ks.key == key {
			return sl.ks
		}
	}
}

// insert adds ks, whose key must be absent.
func (t *keyTable[K, C]) insert(ks *keyState[K, C]) {
	if (t.n+1)*4 > len(t.slots)*3 {
		t.grow()
	}
	mask := len(t.slots) - 1
	i := t.home(ks.hash)
	for t.slots[i].ks != nil {
		i = (i + 1) & mask
	}
	t.slots[i] = tableSlot[K, C]{hash: ks.hash, ks: ks}
	t.n++
}

func (t *keyTable[K, C]) grow() {
	old := t.slots
	t.slots = make([]tableSlot[K, C], max(8, 2*len(old)))
	t.n = 0
	for _, sl := range old {
		if sl.ks != nil {
			t.insert(sl.ks)
		}
	}
}

// remove deletes ks, which must be present.
func (t *keyTable[K, C]) remove(ks *keyState[K, C]) {
	mask := len(t.slots) - 1
	i := t.home(ks.hash)
	for t.slots[i].ks != ks {
		i = (i + 1) & mask
	}
	// Shift back every later entry of the probe run that may not stay
	// behind the hole (its home is not cyclically in (hole, j]).
	hole := i
	for j := (i + 1) & mask; t.slots[j].ks != nil; j = (j + 1) & mask {
		home := t.home(t.slots[j].hash)
		if (j > hole && (home <= hole || home > j)) || (j < hole && home <= hole && home > j) {
			t.slots[hole] = t.slots[j]
			hole = j
		}
	}
	t.slots[hole] = tableSlot[K, C]{}
	t.n--
}

// each calls f for every key state.
func (t *keyTable[K, C]) each(f func(*keyState[K, C])) {
	for _, sl := range t.slots {
		if sl.ks != nil {
			f(sl.ks)
		}
	}
}

func (t *keyTable[K, C]) reset() {
	t.slots, t.n = nil, 0
}
