// Package sockio reads and writes a TCP socket without the Go scheduler's
// blocking-syscall bookkeeping.
//
// Why: every read and write a *net.TCPConn makes goes through
// syscall.Read/Write, which tell the scheduler a blocking call may follow
// (entersyscall/exitsyscall). When the process was idle long enough for
// the runtime's monitor thread (sysmon) to sleep, which is most of the
// time in a client waiting on the network, entering that call also wakes
// the monitor (a futex call, and the monitor's thread runs).
// A socket the net package opened is non-blocking, so its read and write
// never wait in the kernel (golang/go#19563 discusses the same point);
// Conn issues them as raw system calls and leaves the waiting to the net
// package's poller, through syscall.RawConn. On the benchmarks that takes
// about two context switches and a quarter (HTTP/2 over TLS) to a third
// (cleartext HTTP/1.1) of the client's CPU away from each serial request
// (docs/benchmarks.md).
//
// Contract:
//
//   - Wrap returns a *Conn over a *net.TCPConn (exactly that type) and any
//     other connection unchanged. Conn embeds the *net.TCPConn, so
//     deadlines, Close, CloseWrite, SyscallConn and the socket-option
//     methods are the TCPConn's own; NetConn returns it, and so does
//     Unwrap (which returns any other connection as it is).
//   - Read and Write behave as the TCPConn's: the same bytes, io.EOF at
//     the peer's close, and errors of the same types and texts
//     (*net.OpError over *os.SyscallError, os.ErrDeadlineExceeded,
//     net.ErrClosed), so callers that test them see no difference.
//   - Builds with the race detector make the same calls through
//     syscall.Read and syscall.Write, which tell the race detector about
//     the ordering a socket carries between goroutines of one process.
//   - FERRY_RAWIO=off in the environment (read once, at start) turns
//     wrapping off; so does any platform but Linux.
package sockio
