package idlepool

import (
	"sync"
	"sync/atomic"
	"time"
)

// testConn is an exclusive connection that records its Close; when block is
// set, Close waits until it is closed.
type testConn struct {
	id     int
	closed atomic.Int32
	block  chan struct{}
	done   chan struct{} // closed when Close returns
	once   sync.Once
}

func newConn(id int) *testConn { return &testConn{id: id, done: make(chan struct{})} }

func (c *testConn) Close() error {
	if c.block != nil {
		<-c.block
	}
	c.closed.Add(1)
	c.once.Do(func() { close(c.done) })
	return nil
}

func (c *testConn) isClosed() bool { return c.closed.Load() > 0 }

// fakeClock is a manually advanced clock.
type fakeClock struct {
	mu sync.Mutex // guards t
	t  time.Time
}

func newClock() *fakeClock { return &fakeClock{t: time.Unix(1_000_000, 0)} }

func (f *fakeClock) Now() time.Time {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.t
}

func (f *fakeClock) Advance(d time.Duration) {
	f.mu.Lock()
	f.t = f.t.Add(d)
	f.mu.Unlock()
}

// testShared is a shared connection with a stream limit.
type testShared struct {
	mu         sync.Mutex // guards the fields below
	maxStreams int
	active     int
	unusable   bool
	closed     bool
	idleSince  time.Time
	reportIdle bool // implements IdleReporter semantics when set
}

func (s *testShared) ReserveStream() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.unusable || s.closed || s.active >= s.maxStreams {
		return false
	}
	s.active++
	return true
}

func (s *testShared) Usable() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return !s.unusable && !s.closed
}

func (s *testShared) Close() error {
	s.mu.Lock()
	s.closed = true
	s.mu.Unlock()
	return nil
}

func (s *testShared) isClosed() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.closed
}

// idleShared adds IdleSince to testShared.
type idleShared struct{ testShared }

func (s *idleShared) IdleSince() (time.Time, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.idleSince, s.active == 0
}

func (s *idleShared) finishStream(now time.Time) {
	s.mu.Lock()
	s.active--
	if s.active == 0 {
		s.idleSince = now
	}
	s.mu.Unlock()
}
