package idlepool

import "testing"

// usableCounting is a shared connection that counts its Usable calls.
type usableCounting struct {
	*testShared
	usableCalls int
}

func (u *usableCounting) Usable() bool {
	u.usableCalls++
	return u.testShared.Usable()
}

// TestSharedWaitersServedInOrder: GetShared asks a connection with a free stream only
// ReserveStream (Usable costs h2conn locks); a full connection is asked
// Usable and kept, an unusable one is asked and dropped.
func TestSharedWaitersServedInOrder(t *testing.T) {
	p := New[string, *testConn](Config{})
	defer p.Close()
	c := &usableCounting{testShared: &testShared{maxStreams: 1}}
	p.AddShared("k", c)
	s, ok := p.GetShared("k")
	if !ok || s != c || c.usableCalls != 0 {
		t.Fatalf("free stream: got %v %v, Usable asked %d times; want the connection, Usable not asked", s, ok, c.usableCalls)
	}
	if _, ok := p.GetShared("k"); ok || c.usableCalls != 1 {
		t.Fatalf("full: got %v, Usable asked %d times; want a miss after one Usable", ok, c.usableCalls)
	}
	if st := p.Stats(); st.Shared != 1 {
		t.Fatalf("full connection dropped: %d shared left", st.Shared)
	}
	c.testShared.mu.Lock()
	c.testShared.active = 0
	c.testShared.unusable = true
	c.testShared.mu.Unlock()
	if _, ok := p.GetShared("k"); ok {
		t.Fatal("an unusable connection was handed out")
	}
	if st := p.Stats(); st.Shared != 0 {
		t.Fatalf("unusable connection kept: %d shared left", st.Shared)
	}
}
