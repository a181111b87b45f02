// Package dnscache is the lazy DNS cache ferry uses when it dials by itself
// (a user DialContext receives host:port unresolved and resolves on its own).
//
// Contract:
//
//   - Lazy: nothing is resolved until a dial asks; a pooled connection never
//     reaches the cache.
//   - IP literals are returned at once: no lookup, no trace hooks.
//   - Positive answers live for TTL; after that the stale answer is still
//     served (for up to MaxStale more) while exactly one background refresh
//     runs. Failures are cached for NegativeTTL, so a dead name does not turn
//     every request into a DNS round trip, and are never served stale.
//   - A stale answer says so (LookupNetIPStale). A caller that reached none
//     of its addresses asks Reresolve, which waits for the refresh in
//     flight (or looks the name up once more) and returns the name's
//     answer now, so a name that moved costs no failed request. A fresh
//     answer is never looked up again for a failed dial.
//   - Concurrent lookups of one name share one resolver call
//     (golang.org/x/sync/singleflight). The shared call runs on its own
//     context, bounded by LookupTimeout: a caller whose context ends gets its
//     context's error at once, and the others keep waiting for the answer.
//   - httptrace DNSStart and DNSDone fire from the caller's context for every
//     name lookup, cache hits included, as net/http fires them for every
//     dial, and once more for a Reresolve; DNSDone.Coalesced has net/http's meaning: the answer came from a
//     resolver call shared with another concurrent caller.
//   - Errors are *net.DNSError naming the host; the resolver's error keeps its
//     identity (errors.As, IsNotFound, IsTimeout) and a caller's context error
//     satisfies errors.Is(err, context.Canceled / DeadlineExceeded).
//   - The number of names held is bounded by MaxEntries.
//
// A Cache is safe for concurrent use. A hit takes a read lock and does not
// allocate, unless the caller's context carries a ClientTrace with DNS hooks
// or the name has upper-case letters (lower-casing it costs one; ferry's
// transport lower-cases hosts before it resolves).
package dnscache
