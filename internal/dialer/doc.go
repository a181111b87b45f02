// Package dialer opens the TCP (and TLS) connections ferry dials by itself.
//
// Contract:
//
//   - Resolve runs once per request (the caller keeps the answer for retries)
//     through a dnscache.Cache, or the system resolver when there is none.
//   - DialAddrs races the addresses as RFC 8305 ("Happy Eyeballs v2")
//     describes: families interleaved starting with the first address's, a
//     new attempt every FallbackDelay or as soon as the previous attempt
//     fails, the first connection to succeed wins, and every other attempt is
//     cancelled and, if it connected, closed before DialAddrs returns. No
//     goroutine outlives the call.
//   - httptrace ConnectStart/ConnectDone fire for every attempt from the
//     caller's context, with network "tcp" and address "ip:port", as
//     net.Dialer fires them for net/http; all of them fire before DialAddrs
//     returns.
//   - Socket options are applied once per connection through its
//     sockopt.Guard, which travels with the connection so later requests pay
//     no setsockopt for values already in effect.
//   - Errors keep net/http's shape and identity: *net.OpError naming the
//     address (the first attempt's error when all fail), *net.DNSError for
//     resolution, and when the context ends an error satisfying
//     errors.Is(err, ctx.Err()) whose Timeout() is true for a deadline, with
//     net.Dialer's text ("i/o timeout", "operation was canceled").
//   - Keep-alive is best effort, as in net.Dialer: a value the system
//     rejects does not fail the dial (Settings, which the caller asked for,
//     do).
package dialer
