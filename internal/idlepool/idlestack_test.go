package idlepool

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"
)

// idleModel is the reference for TestIdleStackAgainstModel: per key, the
// idle connections oldest first, in a plain slice.
type idleModel struct {
	idle map[string][]modelIdle
}

type modelIdle struct {
	c     *testConn
	since time.Time
}

// expire drops what has sat idle for timeout or longer at now, as the
// pool's sweep on a get or put of the key does.
func (m *idleModel) expire(key string, now time.Time, timeout time.Duration) {
	kept := m.idle[key][:0]
	for _, e := range m.idle[key] {
		if now.Sub(e.since) < timeout {
			kept = append(kept, e)
		}
	}
	m.idle[key] = kept
}

// TestIdleStackAgainstModel runs random puts, gets (through Acquire's
// written-out hit path and through TryGet), clock steps and CloseIdle on a
// few keys with per-key caps from 1 to 6, so that keys keep more idle
// connections than the keyState holds inline and the stack moves entries
// between top and spill in every order, and checks every answer against a
// slice per key: which connection a get returns and how long it sat idle,
// whether a put is refused, and IdleLen after each call. At the end every
// connection is closed exactly once.
func TestIdleStackAgainstModel(t *testing.T) {
	const timeout = 100 * time.Millisecond
	keys := []string{"a", "b", "c"}
	for seed := range uint64(120) {
		rng := rand.New(rand.NewPCG(seed, 7))
		perKey := 1 + rng.IntN(6)
		t.Run(fmt.Sprintf("seed_%d_perkey_%d", seed, perKey), func(t *testing.T) {
			clk := newClock()
			p := New[string, *testConn](Config{MaxIdlePerKey: perKey, IdleTimeout: timeout, Clock: clk.Now})
			m := &idleModel{idle: map[string][]modelIdle{}}
			var all []*testConn
			for step := range 400 {
				clk.Advance(time.Duration(1+rng.IntN(15)) * time.Millisecond)
				now := clk.Now()
				key := keys[rng.IntN(len(keys))]
				switch op := rng.IntN(20); {
				case op < 9: // put
					c := newConn(len(all))
					all = append(all, c)
					m.expire(key, now, timeout)
					wantOK := len(m.idle[key]) < perKey
					if ok := p.Put(key, c); ok != wantOK {
						t.Fatalf("step %d: Put(%s) = %v, want %v (model holds %d, cap %d)", step, key, ok, wantOK, len(m.idle[key]), perKey)
					}
					if wantOK {
						m.idle[key] = append(m.idle[key], modelIdle{c, now})
					} else if !c.isClosed() {
						t.Fatalf("step %d: refused conn %d not closed", step, c.id)
					}
				case op < 19: // get
					m.expire(key, now, timeout)
					idle := m.idle[key]
					var got *testConn
					var idleFor time.Duration
					var ok bool
					if len(idle) > 0 && op%2 == 0 {
						var err error
						got, idleFor, ok, err = p.AcquireTurnHashed(context.Background(), key, p.Hash(key), nil)
						if err != nil {
							t.Fatalf("step %d: Acquire(%s): %v", step, key, err)
						}
					} else {
						got, idleFor, ok = p.TryGet(key)
					}
					if len(idle) == 0 {
						if ok {
							t.Fatalf("step %d: get(%s) returned conn %d, model has none idle", step, key, got.id)
						}
						break
					}
					want := idle[len(idle)-1]
					m.idle[key] = idle[:len(idle)-1]
					if !ok || got != want.c || idleFor != now.Sub(want.since) {
						t.Fatalf("step %d: get(%s) = conn %v ok=%v idle %v, want conn %d idle %v",
							step, key, connID(got), ok, idleFor, want.c.id, now.Sub(want.since))
					}
					if got.isClosed() {
						t.Fatalf("step %d: get(%s) returned closed conn %d", step, key, got.id)
					}
					// The caller owns it now; hand it back later or close it.
					if rng.IntN(2) == 0 {
						got.Close()
						p.Release(key)
					} else {
						c := got
						m.expire(key, now, timeout)
						wantOK := len(m.idle[key]) < perKey
						if ok := p.Put(key, c); ok != wantOK {
							t.Fatalf("step %d: re-Put(%s) = %v, want %v", step, key, ok, wantOK)
						}
						if wantOK {
							m.idle[key] = append(m.idle[key], modelIdle{c, now})
						}
					}
				default: // CloseIdle
					p.CloseIdle()
					for k := range m.idle {
						// What expired may have been swept by a call
						// for another key of its shard and be closing
						// on the pool's closer goroutine; the end checks
						// that it was closed.
						m.expire(k, now, timeout)
						for _, e := range m.idle[k] {
							if !e.c.isClosed() {
								t.Fatalf("step %d: CloseIdle left conn %d of %s open", step, e.c.id, k)
							}
						}
						m.idle[k] = nil
					}
				}
				if got, want := p.IdleLen(key), len(m.idle[key]); got != want {
					t.Fatalf("step %d: IdleLen(%s) = %d, model %d", step, key, got, want)
				}
			}
			p.Close()
			p.closers.Wait()
			for _, c := range all {
				if n := c.closed.Load(); n != 1 {
					t.Fatalf("conn %d closed %d times, want 1", c.id, n)
				}
			}
		})
	}
}
