//go:build linux || darwin || freebsd || netbsd || openbsd

package h1conn

import (
	"syscall"

	"golang.org/x/sys/unix"
)

// quiet reports whether pc, taken from the pool with nothing buffered
// (FitForReuse), holds nothing past its previous response: a non-blocking
// read of its socket (TLS unwrapped) finds neither bytes, EOF nor an
// error, and a TLS layer holds no record. It costs one read system call; a
// connection whose socket cannot be reached (the package's in-memory
// stand-ins) is checked with a deadline peek instead (aliveByDeadline).
func (pc *Conn) quiet() bool {
	rc := pc.idleSocket()
	if rc == nil {
		return pc.aliveByDeadline()
	}
	if pc.emptyRead == nil {
		// Made once per connection: a closure made per call is an
		// allocation per check.
		pc.emptyRead = func(fd uintptr) bool {
			var b [1]byte
			for {
				_, rerr := unix.Read(int(fd), b[:])
				if rerr == unix.EINTR {
					continue
				}
				pc.socketEmpty = rerr == unix.EAGAIN || rerr == unix.EWOULDBLOCK
				return true
			}
		}
	}
	pc.socketEmpty = false
	if err := rc.Read(pc.emptyRead); err != nil || !pc.socketEmpty {
		return false
	}
	// The socket was empty: whatever comes from now on came after the
	// previous response ended.
	pc.readFilled = false
	if pc.idleTLS {
		// A record that arrived with the previous response's last one
		// may wait inside tls.Conn, out of the socket's sight: a peek
		// with a deadline already past finds it (Go's poller fails the
		// socket read itself at once, so this costs no system call).
		return pc.aliveByDeadline()
	}
	return true
}

// tlsLayered reports whether pc's connection is TLS over a socket ferry
// reaches, so that records may wait inside the TLS layer (FitForReuse).
func (pc *Conn) tlsLayered() bool {
	pc.idleSocket()
	return pc.idleTLS
}

// idleSocket returns the socket under pc's connection, finding it on the
// first call only; nil when it cannot be reached. pc is owned by the
// goroutine running its request.
func (pc *Conn) idleSocket() syscall.RawConn {
	if !pc.idleRCKnown {
		pc.idleRCKnown = true
		if rc, tlsLayers, ok := socketOf(pc.conn); ok {
			pc.idleRC = rc
			pc.idleTLS = tlsLayers > 0
		} else if _, standIn := pc.conn.(SocketStandIn); !standIn {
			pc.idleHidden = true
		}
	}
	return pc.idleRC
}

// socketHidden reports whether pc's socket cannot be reached (a custom
// DialContext's wrapper or in-memory connection), so that it is watched
// while idle (idlewatch.go).
func (pc *Conn) socketHidden() bool {
	pc.idleSocket()
	return pc.idleHidden
}
