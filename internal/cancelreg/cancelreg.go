// Package cancelreg finds in-flight requests for the deprecated
// Transport.CancelRequest. net/http keeps one map under one mutex. Here each
// request's Entry lives inside the state that runs it (the HTTP/1.1
// connection, the HTTP/3 exchange, a request's wait for its connection),
// and registering links it into one of a few lists sharded by the
// request's address: no map insert and delete, no hashing, no allocation
// on the per-request path. The price is paid by Cancel, which walks its
// shard's list: linear in the requests in flight (divided by the shard
// count), for an API that has been deprecated since Go 1.6 and is rarely
// called.
package cancelreg

import (
	"context"
	"net/http"
	"sync"
	"unsafe"
)

// Aborter is a connection that can abort the exchange of one of its
// requests, named by its generation (h1conn.Conn.Abort).
type Aborter interface {
	comparable
	Abort(gen uint64, err error)
}

// Registry is the requests in flight of a transport. The zero value is
// ready to use.
type Registry[A Aborter] struct {
	shards [shards]shard[A]
}

const shards = 16

type shard[A Aborter] struct {
	// mu guards head and the prev/next links of every entry in the list.
	mu   sync.Mutex
	head *Entry[A]
	_    [48]byte // keep shards on separate cache lines
}

// Entry is how to cancel one request: an exchange of Conn at generation
// Gen or, when Conn is the zero value, Stop: an HTTP/3 request's context,
// or a request's wait for its connection and its dial. It is in a list
// from Register to Unregister; its owner must not change Req, Conn, Gen or
// Stop in between. Unregister clears them, so an entry kept for the next
// request (an idle connection's) holds nothing alive.
type Entry[A Aborter] struct {
	Req  *http.Request
	Conn A
	Gen  uint64
	Stop context.CancelCauseFunc

	// Guarded by the shard's mu:
	prev, next *Entry[A]
	linked     bool // in the shard's list
}

func (r *Registry[A]) shard(req *http.Request) *shard[A] {
	p := uintptr(unsafe.Pointer(req))
	return &r.shards[(p>>6^p>>12)%shards]
}

// Register links e, whose fields say which request it cancels and how.
func (r *Registry[A]) Register(e *Entry[A]) {
	s := r.shard(e.Req)
	s.mu.Lock()
	e.prev, e.next = nil, s.head
	if s.head != nil {
		s.head.prev = e
	}
	s.head = e
	e.linked = true
	s.mu.Unlock()
}

// Unregister unlinks e if Register linked it and clears it; it is safe to
// call twice.
func (r *Registry[A]) Unregister(e *Entry[A]) {
	s := r.shard(e.Req)
	s.mu.Lock()
	if !e.linked {
		s.mu.Unlock()
		return
	}
	if e.prev != nil {
		e.prev.next = e.next
	} else {
		s.head = e.next
	}
	if e.next != nil {
		e.next.prev = e.prev
	}
	*e = Entry[A]{}
	s.mu.Unlock()
}

// Cancel aborts req's exchange with err (net/http's "request canceled").
// The abort runs outside the shard's lock.
func (r *Registry[A]) Cancel(req *http.Request, err error) {
	s := r.shard(req)
	var found Entry[A]
	s.mu.Lock()
	for e := s.head; e != nil; e = e.next {
		if e.Req == req {
			found = Entry[A]{Conn: e.Conn, Gen: e.Gen, Stop: e.Stop}
			break
		}
	}
	s.mu.Unlock()
	var none A
	switch {
	case found.Conn != none:
		found.Conn.Abort(found.Gen, err)
	case found.Stop != nil:
		found.Stop(err)
	}
}

// Registered reports whether req is in the registry, and Len how many
// requests are: for tests that check an entry does not outlive its
// request.
func (r *Registry[A]) Registered(req *http.Request) bool {
	s := r.shard(req)
	s.mu.Lock()
	defer s.mu.Unlock()
	for e := s.head; e != nil; e = e.next {
		if e.Req == req {
			return true
		}
	}
	return false
}

// Len is the number of requests registered.
func (r *Registry[A]) Len() int {
	n := 0
	for i := range r.shards {
		s := &r.shards[i]
		s.mu.Lock()
		for e := s.head; e != nil; e = e.next {
			n++
		}
		s.mu.Unlock()
	}
	return n
}
