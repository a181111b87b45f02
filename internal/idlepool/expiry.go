package idlepool

import (
	"sync"
	"sync/atomic"
	"time"
)

// expiryTimer is the single pool-wide timer that closes expired connections
// when no get or put comes along to do it.
type expiryTimer struct {
	// mu guards t and at. It is never held together with a shard lock.
	mu sync.Mutex
	t  *time.Timer
	at int64 // pool-clock deadline the timer is armed for; noIdle when not armed
	// armed mirrors at != noIdle so that put can check it without the lock.
	armed atomic.Bool
}

// timerOwner is the pool as the timer sees it (the timer is not generic).
type timerOwner interface {
	nowAndClosed() (now int64, closed bool)
	fire()
}

// arm makes the timer fire no later than deadline (pool clock).
func (e *expiryTimer) arm(p timerOwner, deadline int64) {
	e.mu.Lock()
	defer e.mu.Unlock()
	now, closed := p.nowAndClosed()
	if closed {
		return
	}
	if e.at != noIdle && e.at <= deadline {
		return
	}
	e.at = deadline
	e.armed.Store(true)
	d := time.Duration(deadline - now)
	if d < 0 {
		d = 0
	}
	if e.t == nil {
		e.t = time.AfterFunc(d, p.fire)
	} else {
		e.t.Reset(d)
	}
}

// disarm marks the timer as not armed; the next put re-arms it.
func (e *expiryTimer) disarm() {
	e.mu.Lock()
	e.at = noIdle
	e.armed.Store(false)
	e.mu.Unlock()
}

// stop stops the timer for good (Close).
func (e *expiryTimer) stop() {
	e.mu.Lock()
	if e.t != nil {
		e.t.Stop()
	}
	e.at = noIdle
	e.armed.Store(false)
	e.mu.Unlock()
}

// deadline returns when the timer is armed to fire, and whether it is.
func (e *expiryTimer) deadline() (int64, bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.at, e.at != noIdle
}

func (p *Pool[K, C]) nowAndClosed() (int64, bool) { return p.now(), p.closed.Load() }

// fire is the timer callback: sweep everything due, then re-arm for the next
// earliest deadline, if anything may still expire.
func (p *Pool[K, C]) fire() {
	p.expiry.disarm()
	if p.closed.Load() {
		return
	}
	expired, next := p.sweepAll(p.now())
	if next != noIdle {
		p.expiry.arm(p, next) // before closing: a slow Close must not delay it
	}
	closeAll(expired)
}

// sweepIfDueLocked sweeps s when its watermark says something may have
// expired by now, returning the expired connections for the caller to close
// after unlocking. In the common case it is one comparison.
func (p *Pool[K, C]) sweepIfDueLocked(s *shard[K, C], now int64) []C {
	timeout := p.timeout.Load()
	if timeout <= 0 || now-s.watermark.Load() < timeout {
		return nil
	}
	return p.sweepShardLocked(s, now, timeout, nil)
}

// sweepShardLocked removes every idle connection of s that has sat idle for
// timeout or longer, appends them to out, releases their slots and
// recomputes the watermark exactly. Cost: O(keys of s holding idle conns).
func (p *Pool[K, C]) sweepShardLocked(s *shard[K, C], now, timeout int64, out []C) []C {
	p.counters.sweeps.Add(1)
	cutoff := now - timeout
	oldest := int64(noIdle)
	removed := 0
	for i := 0; i < len(s.idleKeys); {
		ks := s.idleKeys[i]
		n := 0
		for n < int(ks.nidle) && ks.idleAt(n).since <= cutoff {
			n++
		}
		if n > 0 {
			out = s.removeOldestLocked(ks, n, out)
			removed += n
			for range n {
				p.releaseSlotLocked(s, ks)
			}
		}
		if ks.nidle == 0 {
			continue // unlisted: idleKeys[i] is now another key
		}
		oldest = min(oldest, ks.oldestIdle().since)
		i++
	}
	s.watermark.Store(oldest)
	if removed > 0 {
		p.counters.expirations.Add(uint64(removed))
		p.afterRemove(removed)
	}
	return out
}

// sweepAll sweeps every shard whose watermark is due and the shared
// connections, returning what expired and the next deadline (pool clock) at
// which something may expire, noIdle if nothing can.
func (p *Pool[K, C]) sweepAll(now int64) (expired []C, next int64) {
	next = noIdle
	timeout := p.timeout.Load()
	if timeout <= 0 {
		return nil, noIdle
	}
	for i := range p.shards {
		s := &p.shards[i]
		wm := s.watermark.Load()
		if wm == noIdle {
			continue
		}
		if now-wm >= timeout {
			s.mu.Lock()
			expired = p.sweepShardLocked(s, now, timeout, expired)
			wm = s.watermark.Load()
			s.mu.Unlock()
			if wm == noIdle {
				continue
			}
		}
		next = min(next, wm+timeout)
	}
	if p.sharedSeen.Load() {
		next = min(next, p.sweepShared(now, timeout))
	}
	return expired, next
}

// SetIdleTimeout changes IdleTimeout at run time; zero or negative means idle
// connections never expire. A shorter timeout moves every deadline earlier,
// so it sweeps at once (closing what is now expired, off the caller's
// goroutine) and re-arms the timer for the new earliest deadline.
func (p *Pool[K, C]) SetIdleTimeout(d time.Duration) {
	p.timeout.Store(int64(d))
	if p.closed.Load() {
		return
	}
	if d <= 0 {
		p.expiry.stop()
		return
	}
	expired, next := p.sweepAll(p.now())
	p.closeAsync(expired)
	if next != noIdle {
		p.expiry.arm(p, next)
	}
}

// IdleTimeout returns the current idle timeout.
func (p *Pool[K, C]) IdleTimeout() time.Duration {
	return time.Duration(p.timeout.Load())
}
