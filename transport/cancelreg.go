package transport

import (
	"context"
	"net/http"
	"sync"
	"unsafe"
)

// cancelRegistry finds in-flight requests for the deprecated
// Transport.CancelRequest. net/http keeps one map under one mutex. Here each
// request's entry lives inside the state that runs it (the HTTP/1.1
// connection, or the HTTP/3 exchange), and registering links it into one of
// a few lists sharded by the request's address: no map insert and delete,
// no hashing, no allocation on the per-request path. The price is paid by
// CancelRequest, which walks its shard's list: linear in the requests in
// flight (divided by the shard count), for an API that has been deprecated
// since Go 1.6 and is rarely called.
type cancelRegistry struct {
	shards [cancelShards]cancelShard
}

const cancelShards = 16

type cancelShard struct {
	// mu guards head and the prev/next links of every entry in the list.
	mu   sync.Mutex
	head *cancelEntry
	_    [48]byte // keep shards on separate cache lines
}

// cancelEntry is how to cancel one request: an HTTP/1.1 exchange (pc at
// generation gen) or, when pc is nil, stop: an HTTP/3 request's context,
// or a request's wait for its connection and its dial (connWait.cancel).
// It is in a list from register to unregister; its owner must not change
// req, pc, gen or stop in between. unregister clears them, so an entry
// kept for the next request (an idle connection's) holds nothing alive.
type cancelEntry struct {
	req  *http.Request
	pc   *h1Conn
	gen  uint64
	stop context.CancelCauseFunc

	// Guarded by the shard's mu:
	prev, next *cancelEntry
	linked     bool // in the shard's list
}

func (r *cancelRegistry) shard(req *http.Request) *cancelShard {
	p := uintptr(unsafe.Pointer(req))
	return &r.shards[(p>>6^p>>12)%cancelShards]
}

// register links e, whose fields say which request it cancels and how.
func (r *cancelRegistry) register(e *cancelEntry) {
	s := r.shard(e.req)
	s.mu.Lock()
	e.prev, e.next = nil, s.head
	if s.head != nil {
		s.head.prev = e
	}
	s.head = e
	e.linked = true
	s.mu.Unlock()
}

// unregister unlinks e if register linked it and clears it; it is safe to
// call twice.
func (r *cancelRegistry) unregister(e *cancelEntry) {
	s := r.shard(e.req)
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
	*e = cancelEntry{}
	s.mu.Unlock()
}

// cancel aborts req's exchange with net/http's "request canceled" error.
// The abort runs outside the shard's lock.
func (r *cancelRegistry) cancel(req *http.Request) {
	s := r.shard(req)
	var found cancelEntry
	s.mu.Lock()
	for e := s.head; e != nil; e = e.next {
		if e.req == req {
			found = cancelEntry{pc: e.pc, gen: e.gen, stop: e.stop}
			break
		}
	}
	s.mu.Unlock()
	switch {
	case found.pc != nil:
		found.pc.Abort(found.gen, errRequestCanceled)
	case found.stop != nil:
		found.stop(errRequestCanceled)
	}
}
