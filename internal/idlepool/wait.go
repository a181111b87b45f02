package idlepool

// waitResult is what a waiting Acquire is handed: a connection (reused),
// permission to dial (neither reused nor err), or an error.
type waitResult[C Conn] struct {
	c      C
	reused bool
	err    error
}

// waiter is one Acquire blocked on a full key. ch has room for exactly one
// result, so handing it over never blocks and happens under the shard lock;
// queued (guarded by the shard's mu) tells a cancelling waiter whether it was
// handed something already. seq is the waiter's place in line: assigned from
// keyState.nextSeq when a request first waits, and kept in its Turn, so a
// request that was woken for a stream, lost it, and waits again goes back to
// its old place rather than to the end.
type waiter[C Conn] struct {
	ch     chan waitResult[C]
	queued bool
	seq    uint64
}

// waitQueue is a FIFO of waiters of one key, ordered by seq: a slice with a
// moving head, compacted when the head passes half of it.
type waitQueue[C Conn] struct {
	q    []*waiter[C]
	head int
}

// pushWaiter queues w on ks, creating the key's queue at its first wait.
func (ks *keyState[K, C]) pushWaiter(w *waiter[C]) {
	if ks.waiters == nil {
		ks.waiters = new(waitQueue[C])
	}
	ks.waiters.push(w)
}

// len, remove and hand accept a nil queue: a key that never waited.
func (wq *waitQueue[C]) len() int {
	if wq == nil {
		return 0
	}
	return len(wq.q) - wq.head
}

// push queues w in seq order: at the end for a new waiter (the highest
// seq), before later arrivals for one that waits again.
func (wq *waitQueue[C]) push(w *waiter[C]) {
	if wq.head > 0 && wq.head >= len(wq.q)/2 {
		n := copy(wq.q, wq.q[wq.head:])
		clear(wq.q[n:])
		wq.q = wq.q[:n]
		wq.head = 0
	}
	w.queued = true
	wq.q = append(wq.q, w)
	for i := len(wq.q) - 1; i > wq.head && wq.q[i-1].seq > w.seq; i-- {
		wq.q[i], wq.q[i-1] = wq.q[i-1], wq.q[i]
	}
}

// popFront removes and returns the longest-waiting waiter, or nil.
func (wq *waitQueue[C]) popFront() *waiter[C] {
	if wq.head == len(wq.q) {
		return nil
	}
	w := wq.q[wq.head]
	wq.q[wq.head] = nil
	wq.head++
	if wq.head == len(wq.q) {
		wq.q = wq.q[:0]
		wq.head = 0
	}
	w.queued = false
	return w
}

// remove takes w out of the queue (a cancelled wait); it reports false when
// w was no longer queued, that is when it has been handed a result.
func (wq *waitQueue[C]) remove(w *waiter[C]) bool {
	if wq == nil || !w.queued {
		return false
	}
	for i := wq.head; i < len(wq.q); i++ {
		if wq.q[i] == w {
			copy(wq.q[i:], wq.q[i+1:])
			wq.q[len(wq.q)-1] = nil
			wq.q = wq.q[:len(wq.q)-1]
			if wq.head == len(wq.q) {
				wq.q = wq.q[:0]
				wq.head = 0
			}
			w.queued = false
			return true
		}
	}
	return false
}

// hand gives r to the first waiter, reporting false when nobody waits.
func (wq *waitQueue[C]) hand(r waitResult[C]) bool {
	if wq == nil {
		return false
	}
	w := wq.popFront()
	if w == nil {
		return false
	}
	w.ch <- r
	return true
}
