// Package idlepool is ferry's connection pool: idle exclusive connections
// (HTTP/1.1) taken most-recently-used first, and shared multiplexed
// connections (HTTP/2, HTTP/3) handed to many requests at once. It knows
// nothing about HTTP; a key is any comparable value naming an origin.
//
// # Layout
//
// Keys are spread over 64 shards by maphash.Comparable; each shard has its own
// lock (whose waiters sleep rather than spin, so that many requests for one
// key take turns on warm caches) and an open-addressing table indexed by the
// same hash (a key is hashed once per call, or once per request when the
// caller keeps its KeyHash and uses the ...Hashed calls), so a get or put
// touches only its key's shard. A key keeps its idle connections in a stack
// whose newest DefaultMaxIdlePerKey entries live inside the key's record and
// whose older ones spill over into a slice beside it (idlestack.go), so a get
// and a put touch only the record however many connections the key keeps
// idle; nothing is allocated per get or put once the pool is warm (a new key
// allocates its record once). A shard also keeps the list of
// its keys that currently hold idle connections, so a sweep or an eviction
// visits only those.
//
// # Expiry without a timer per connection
//
// Each shard records a watermark: a lower bound on the time its oldest idle
// connection went idle. A connection has expired once it has sat idle for
// IdleTimeout; so nothing in the shard can have expired before
// watermark+IdleTimeout, and get and put compare one number and skip the sweep
// until then. The five paths that move the watermark:
//
//   - put: an empty shard's watermark becomes the put time; a put into a
//     non-empty shard cannot lower it (the new connection is the newest).
//   - get and eviction: removing the oldest raises the true minimum; the
//     watermark is left as a lower bound (an early check costs one sweep,
//     which recomputes it exactly) so that the hot path never rescans.
//   - sweep (from get/put or the timer): recomputes it exactly.
//   - CloseIdle and Close: reset it to "nothing idle".
//   - SetIdleTimeout: the deadline is watermark+timeout, so a shorter timeout
//     moves every deadline earlier at once; SetIdleTimeout sweeps at once and
//     re-arms the timer for the new earliest deadline.
//
// One pool-wide timer (time.AfterFunc, re-armed, never one per connection)
// fires at the earliest deadline over all shards so that a client that went
// quiet still closes its expired connections. It is armed only while
// something idle may expire and is stopped by Close; no goroutine outlives
// the pool except one closing a connection whose Close has not returned.
//
// # Shared connections and their expiry
//
// A SharedConn that also implements IdleReporter (IdleSince) is expired by the
// pool-wide timer when it has had no active stream for IdleTimeout. While such
// connections are pooled the timer checks them at least once per IdleTimeout.
// The pool removes an expiring shared connection from its list first, then
// asks it again (or calls CloseIfIdle when it implements IdleCloser) so that a
// stream reserved in the meantime is not cut; a connection that became busy is
// put back. A shared connection dropped because it is no longer Usable is not
// closed by the pool (it may still be finishing streams after a GOAWAY); its
// slot is released.
//
// # Slots and waiting
//
// With MaxConnsPerKey set, every live connection of a key holds a slot: one
// being dialled (reserved by Acquire), one in use, one idle, one shared.
// Acquire waits in FIFO order when the key is full. A put hands the connection
// straight to the first waiter; a released slot becomes the first waiter's
// permission to dial. A waiter whose context ends as it is handed something
// gives it back (Put or Release, or passes a stream wake-up on), so nothing
// is lost.
//
// A request that shares connections also waits for a stream: the owner of a
// shared connection calls StreamReleased(key) for every freed stream, which
// hands the first waiter ErrSharedAvailable. A Turn (GetSharedTurn, then
// AcquireTurn) remembers the key's release count seen by the look, so a
// release between the look and the wait sends the request to look again
// instead of waiting, and a woken request that lost the stream to another
// waits again in its old place.
//
// # Closing
//
// The pool never calls Close, or any method of a connection, while holding a
// lock. Connections of other keys that a get or put finds expired or evicts
// are closed on a separate goroutine, so a Close that blocks delays nobody's
// request.
package idlepool
