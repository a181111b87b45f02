package idlepool

import (
	"container/list"
	"sync"
	"time"
)

// globalMutexPool is a small, faithful model of net/http's idle pool (Go
// 1.26 transport.go: idleMu, idleConn, idleConnWait, idleLRU, idleTimer) for
// the benchmark baseline: one mutex for every key, a map of slices, a
// container/list LRU with a map from conn to its element (an element
// allocated on every put), and one time.AfterFunc per idle conn, created on
// its first put and Reset on each later put; a get leaves it running (as
// net/http does; it fires, finds the conn busy and does nothing) and the
// removal of a conn stops it. Also modelled because net/http does them on
// every pooled request: persistConn.isBroken (a lock of the conn's own mutex)
// on get and on put, the scan of the key's idle list for a duplicate on put,
// and the LRU membership check in connLRU.add. Not modelled (so the model is,
// if anything, cheaper than net/http): the wantConn allocation and its
// mutex, idleConnWait bookkeeping on a miss, connsPerHost accounting.
type globalMutexPool[K comparable] struct {
	mu          sync.Mutex // guards everything below
	idle        map[K][]*modelConn[K]
	wait        map[K][]chan *modelConn[K]
	lru         *list.List // of *modelConn, front is the most recent
	lruElem     map[*modelConn[K]]*list.Element
	maxIdle     int
	maxPerKey   int
	idleTimeout time.Duration
}

type modelConn[K comparable] struct {
	key    K
	idleAt time.Time
	timer  *time.Timer
	pool   *globalMutexPool[K]
	mu     sync.Mutex // guards closed, as persistConn.mu guards pc.closed
	closed bool
}

// isBroken is persistConn.isBroken.
func (c *modelConn[K]) isBroken() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.closed
}

func newGlobalMutexPool[K comparable](maxIdle, maxPerKey int, idleTimeout time.Duration) *globalMutexPool[K] {
	return &globalMutexPool[K]{
		idle:        make(map[K][]*modelConn[K]),
		wait:        make(map[K][]chan *modelConn[K]),
		lru:         list.New(),
		lruElem:     make(map[*modelConn[K]]*list.Element),
		maxIdle:     maxIdle,
		maxPerKey:   maxPerKey,
		idleTimeout: idleTimeout,
	}
}

// get is queueForIdleConn's idle half: the most recent conn not too old.
func (p *globalMutexPool[K]) get(key K) (*modelConn[K], bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	var oldTime time.Time
	if p.idleTimeout > 0 {
		oldTime = time.Now().Add(-p.idleTimeout)
	}
	conns := p.idle[key]
	for len(conns) > 0 {
		c := conns[len(conns)-1]
		conns = conns[:len(conns)-1]
		tooOld := !oldTime.IsZero() && c.idleAt.Round(0).Before(oldTime)
		if tooOld {
			go c.closeIfStillIdle()
		}
		if c.isBroken() || tooOld {
			continue
		}
		if ele, ok := p.lruElem[c]; ok {
			p.lru.Remove(ele)
			delete(p.lruElem, c)
		}
		if len(conns) > 0 {
			p.idle[key] = conns
		} else {
			delete(p.idle, key)
		}
		return c, true
	}
	delete(p.idle, key)
	return nil, false
}

// put is tryPutIdleConn: a waiter first, then the per-key cap, the LRU and
// the global cap, then the per-conn timer.
func (p *globalMutexPool[K]) put(c *modelConn[K]) bool {
	if c.isBroken() {
		return false
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if q, ok := p.wait[c.key]; ok && len(q) > 0 {
		q[0] <- c
		p.wait[c.key] = q[1:]
		return true
	}
	conns := p.idle[c.key]
	if len(conns) >= p.maxPerKey {
		return false
	}
	for _, exist := range conns {
		if exist == c {
			panic("model: conn put twice")
		}
	}
	p.idle[c.key] = append(conns, c)
	if _, ok := p.lruElem[c]; ok {
		panic("model: conn already in the LRU")
	}
	p.lruElem[c] = p.lru.PushFront(c)
	if p.maxIdle != 0 && p.lru.Len() > p.maxIdle {
		oldest := p.lru.Remove(p.lru.Back()).(*modelConn[K])
		p.removeLocked(oldest)
	}
	if p.idleTimeout > 0 {
		if c.timer != nil {
			c.timer.Reset(p.idleTimeout)
		} else {
			c.timer = time.AfterFunc(p.idleTimeout, c.closeIfStillIdle)
		}
	}
	c.idleAt = time.Now()
	return true
}

func (p *globalMutexPool[K]) removeLocked(c *modelConn[K]) {
	if c.timer != nil {
		c.timer.Stop()
	}
	delete(p.lruElem, c)
	conns := p.idle[c.key]
	for i, x := range conns {
		if x == c {
			p.idle[c.key] = append(conns[:i], conns[i+1:]...)
			break
		}
	}
	c.mu.Lock()
	c.closed = true
	c.mu.Unlock()
}

func (c *modelConn[K]) closeIfStillIdle() {
	p := c.pool
	p.mu.Lock()
	defer p.mu.Unlock()
	if ele, ok := p.lruElem[c]; ok {
		p.lru.Remove(ele)
		p.removeLocked(c)
	}
}

// closeAll stops every timer (benchmark cleanup).
func (p *globalMutexPool[K]) closeAll() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, conns := range p.idle {
		for _, c := range conns {
			if c.timer != nil {
				c.timer.Stop()
			}
		}
	}
	p.idle = nil
}
