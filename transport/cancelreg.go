package transport

import (
	"net/http"
	"sync"
	"unsafe"
)

// cancelRegistry maps in-flight requests to their connection for the
// deprecated Transport.CancelRequest. net/http keeps one map under one
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

type cancelEntry struct {
	pc  *h1Conn
	gen uint64
}

func (r *cancelRegistry) shard(req *http.Request) *cancelShard {
	p := uintptr(unsafe.Pointer(req))
	return &r.shards[(p>>6^p>>12)%cancelShards]
}

func (r *cancelRegistry) register(req *http.Request, pc *h1Conn, gen uint64) {
	s := r.shard(req)
	s.mu.Lock()
	if s.m == nil {
		s.m = make(map[*http.Request]cancelEntry)
	}
	s.m[req] = cancelEntry{pc, gen}
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
	if ok {
		e.pc.abort(e.gen, errRequestCanceled)
	}
}
