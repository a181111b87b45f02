package testpeer

import (
	"net"
	"sync"
)

// connSet holds a server's open connections, so that closing the server
// reaches every one of them, and counts those it accepted. A connection
// leaves it when its script is done, so a server shared by many short
// connections (a fuzz target's) holds only the open ones.
type connSet struct {
	mu       sync.Mutex // guards live and accepted
	live     map[net.Conn]struct{}
	accepted int
}

func (s *connSet) add(c net.Conn) {
	s.mu.Lock()
	if s.live == nil {
		s.live = make(map[net.Conn]struct{})
	}
	s.live[c] = struct{}{}
	s.accepted++
	s.mu.Unlock()
}

func (s *connSet) remove(c net.Conn) {
	s.mu.Lock()
	delete(s.live, c)
	s.mu.Unlock()
}

// counts reports the connections open and those accepted so far.
func (s *connSet) counts() (open, accepted int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.live), s.accepted
}

// closeAll closes every open connection (outside the lock: a Close may
// take its time).
func (s *connSet) closeAll() {
	s.mu.Lock()
	conns := make([]net.Conn, 0, len(s.live))
	for c := range s.live {
		conns = append(conns, c)
	}
	s.mu.Unlock()
	for _, c := range conns {
		c.Close()
	}
}

// serveEach accepts connections on ln until it is closed, adds each to set
// and serves it on a goroutine of its own, counted in wg, with n its
// position in accept order; the connection is closed when serve returns,
// then leaves set (so an open count never includes a closed one). It is
// the caller's goroutine, already counted in wg.
func serveEach(ln net.Listener, wg *sync.WaitGroup, set *connSet, serve func(n int, c net.Conn)) {
	defer wg.Done()
	for n := 0; ; n++ {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		set.add(c)
		wg.Add(1)
		go func(n int) {
			defer wg.Done()
			serve(n, c)
			c.Close()
			set.remove(c)
		}(n)
	}
}
