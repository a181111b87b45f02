package transport

import (
	"context"
	"net/http"
	"sync"
	"unsafe"
)

// cancelRegistry maps in-flight requests to their connection (HTTP/1.1) or
// their context (HTTP/3) for the deprecated Transport.CancelRequest. net/http keeps one map under one
// mutex; this one is sharded by the request's address so concurrent
// requests rarely meet on a lock. Registering costs a map insert in a warm
// map (no allocation once the shard's map has grown).
type cancelRegistry struct {
	shards [cancelShards]cancelShard
}

const cancelShards = 16

type cancelShard struct {
	// mu guards m.
	mu sync.Mutex
	m  map[*http.Request]cancelEntry
	_  [40]byte // keep shards on separate cache lines
}

// cancelEntry is how to cancel one request: an HTTP/1.1 exchange (pc at
// generation gen) or, when pc is nil, an HTTP/3 request's context (stop).
type cancelEntry struct {
	pc   *h1Conn
	gen  uint64
	stop context.CancelCauseFunc
}

func (r *cancelRegistry) shard(req *http.Request) *cancelShard {
	p := uintptr(unsafe.Pointer(req))
	return &r.shards[(p>>6^p>>12)%cancelShards]
}

func (r *cancelRegistry) register(req *http.Request, pc *h1Conn, gen uint64) {
	r.put(req, cancelEntry{pc: pc, gen: gen})
}

// registerFunc registers an HTTP/3 request: cancelling it calls stop with
// net/http's "request canceled" error.
func (r *cancelRegistry) registerFunc(req *http.Request, stop context.CancelCauseFunc) {
	r.put(req, cancelEntry{stop: stop})
}

func (r *cancelRegistry) put(req *http.Request, e cancelEntry) {
	s := r.shard(req)
	s.mu.Lock()
	if s.m == nil {
		s.m = make(map[*http.Request]cancelEntry)
	}
	s.m[req] = e
	s.mu.Unlock()
}

func (r *cancelRegistry) unregister(req *http.Request) {
	s := r.shard(req)
	s.mu.Lock()
	delete(s.m, req)
	s.mu.Unlock()
}

// cancel aborts req's exchange with net/http's "request canceled" error.
func (r *cancelRegistry) cancel(req *http.Request) {
	s := r.shard(req)
	s.mu.Lock()
	e, ok := s.m[req]
	s.mu.Unlock()
	switch {
	case !ok:
	case e.pc != nil:
		e.pc.abort(e.gen, errRequestCanceled)
	case e.stop != nil:
		e.stop(errRequestCanceled)
	}
}
