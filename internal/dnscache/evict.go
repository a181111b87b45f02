package dnscache

import (
	"container/heap"
	"time"
)

// byEnd is the cache's entries ordered by the time after which each can no
// longer be served (its end), soonest first: a binary heap, so that making
// room in a full cache costs O(log entries) instead of a scan of every
// entry under the write lock for each new name. Each entry records its key
// and its index in the heap. Cache.mu guards it.
type byEnd []*entry

func (h byEnd) Len() int           { return len(h) }
func (h byEnd) Less(i, j int) bool { return h[i].end().Before(h[j].end()) }
func (h byEnd) Swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].heapIdx = i
	h[j].heapIdx = j
}
func (h *byEnd) Push(x any) {
	e := x.(*entry)
	e.heapIdx = len(*h)
	*h = append(*h, e)
}
func (h *byEnd) Pop() any {
	old := *h
	e := old[len(old)-1]
	old[len(old)-1] = nil
	*h = old[:len(old)-1]
	return e
}

// end is when e can no longer be served: the later of expires and
// staleUntil.
func (e *entry) end() time.Time {
	if e.expires.After(e.staleUntil) {
		return e.expires
	}
	return e.staleUntil
}

// setLocked makes e key's entry, replacing any entry key had. e must not be
// published yet: setLocked writes its key and heap index.
func (c *Cache) setLocked(key string, e *entry) {
	if old := c.entries[key]; old != nil {
		heap.Remove(&c.byEnd, old.heapIdx)
	}
	e.key = key
	c.entries[key] = e
	heap.Push(&c.byEnd, e)
}

// evictLocked removes every entry that can no longer be served; if none
// can go, it removes the one closest to that point. It runs only on an
// insert into a full cache, which follows a real resolver call, and costs
// O(log entries) per entry removed.
func (c *Cache) evictLocked(now time.Time) {
	removed := 0
	for len(c.byEnd) > 0 && !now.Before(c.byEnd[0].end()) {
		delete(c.entries, heap.Pop(&c.byEnd).(*entry).key)
		removed++
	}
	if removed == 0 && len(c.byEnd) > 0 {
		delete(c.entries, heap.Pop(&c.byEnd).(*entry).key)
		removed++
	}
	c.stats.evictions.Add(uint64(removed))
}
