package idlepool

import (
	"math/rand/v2"
	"testing"
	"unsafe"
)

// TestKeyTableAgainstMap applies random inserts and removes, with hashes
// drawn from a small range so probe runs collide and wrap, and checks every
// key against a map after each step.
func TestKeyTableAgainstMap(t *testing.T) {
	for _, hashRange := range []uint64{3, 16, 1 << 20} {
		rng := rand.New(rand.NewPCG(hashRange, 7))
		var tab keyTable[int, *testConn]
		want := map[int]*keyState[int, *testConn]{}
		for step := range 6000 {
			k := rng.IntN(300)
			if ks, ok := want[k]; ok && rng.IntN(2) == 0 {
				tab.remove(ks)
				delete(want, k)
			} else if !ok {
				ks := &keyState[int, *testConn]{key: k, keyCold: &keyCold[*testConn]{}, hash: rng.Uint64N(hashRange) << tableShift}
				tab.insert(ks)
				want[k] = ks
			}
			if step%97 == 0 || (hashRange == 3 && step%5 == 0) {
				for k := range 300 {
					h := uint64(0)
					if ks := want[k]; ks != nil {
						h = ks.hash
					}
					got := tab.get(h, k)
					if got != want[k] {
						t.Fatalf("range %d step %d: get(%d) = %v, want %v", hashRange, step, k, got, want[k])
					}
				}
				if tab.n != len(want) {
					t.Fatalf("n = %d, want %d", tab.n, len(want))
				}
			}
		}
	}
}

func TestShardLayout(t *testing.T) {
	if size := unsafe.Sizeof(shard[string, *testConn]{}); size%64 != 0 {
		t.Fatalf("shard is %d bytes, not a multiple of the 64-byte cache line", size)
	}
	if off := unsafe.Offsetof(shard[string, *testConn]{}.hits); off+8 > 64 {
		t.Fatalf("hits at offset %d: the hot fields no longer fit the first line", off)
	}
}

// TestKeyStateLayout checks what the keyState comment promises for the
// benchmark's key shape (three strings and a bool): the key starts the
// struct, the idle stack's top and counts end it, and it falls in the
// runtime's 128-byte size class (more than 112 bytes, at most 128), whose
// objects are 128-byte aligned.
func TestKeyStateLayout(t *testing.T) {
	var ks keyState[benchKey, *benchConn]
	if size := unsafe.Sizeof(ks); size <= 112 || size > 128 {
		t.Fatalf("keyState is %d bytes, want 113-128 (the 128-byte size class)", size)
	}
	if off := unsafe.Offsetof(ks.idleIdx); off+4 != unsafe.Sizeof(ks) {
		t.Fatalf("idleIdx ends at %d, want %d: the idle stack and counts no longer end the struct", off+4, unsafe.Sizeof(ks))
	}
	if off := unsafe.Offsetof(ks.top); off < 64 || off+unsafe.Sizeof(ks.top) > 128 {
		t.Fatalf("top at %d-%d, want within the second cache line", off, off+unsafe.Sizeof(ks.top))
	}
	if off := unsafe.Offsetof(ks.key); off != 0 {
		t.Fatalf("key at offset %d, want 0", off)
	}
}
