// Package altsvc parses HTTP Alternative Services (RFC 7838) and keeps an
// origin-scoped cache of the alternatives a client may use, for example the
// HTTP/3 endpoint an https origin advertises with `Alt-Svc: h3=":443"`.
//
// The contract of [Cache]:
//
//   - Origins are normalised ([Origin]): `https://Example.COM` and
//     `https://example.com:443` are one origin. Only https origins have
//     alternatives (RFC 7838 section 2.1); other schemes are rejected with
//     [ErrNotHTTPS].
//   - A header received for an origin replaces that origin's alternatives;
//     the value `clear` removes them. A malformed alternative is skipped and
//     reported (as a [*ParseError]); the valid ones are kept, and a value with
//     no valid alternative at all leaves the cache untouched.
//   - `ma` defaults to 24 hours and is shortened by the response's Age.
//   - [Cache.Lookup] and [Cache.Usable] look at one origin only: they prune the
//     expired alternatives of that origin and never scan the others. They do
//     not allocate and cost the same at 1 and at 1000 origins. They take no
//     lock: each origin's alternatives are an immutable snapshot that writes
//     replace (copy-on-write), so concurrent lookups neither serialize nor
//     write shared memory (but for a last-use time, at most once per
//     millisecond per origin), and each sees an origin before or after a
//     write, never in between.
//   - Writes (updates, broken marks, network changes), [Cache.Len] and
//     [Cache.Snapshot] reclaim every expired entry of the whole cache. A
//     cache-wide watermark (the earliest expiry held) lets them skip the sweep
//     until something can actually have expired, so a write stays O(1).
//   - The number of origins is bounded ([Options.MaxOrigins], default 1000):
//     admitting a new origin into a full cache first reclaims expired origins
//     and only then evicts the least recently used live one. Each origin keeps
//     at most [MaxAlternatives] alternatives.
//   - A failing alternative is marked broken ([Cache.MarkBroken]): hidden for
//     5 minutes, doubling with each further failure up to 48 hours;
//     [Cache.MarkWorking] resets it. Broken marks survive header updates that
//     keep the same alternative. [Cache.NetworkChanged] drops every
//     alternative without `persist=1` and forgets all broken marks.
//   - [Cache.Save] and [Cache.Load] write and read a line-oriented text file
//     so a process can start warm.
//   - Time comes from [Options.Clock], so tests need no sleeps.
//
// A Cache is safe for concurrent use and may be shared between transports.
package altsvc
