//go:build !(linux || darwin || freebsd || netbsd || openbsd)

package transport

import (
	"net"
	"syscall"
)

// rawConnOf is nil where writeAwait is not available: requests take the
// usual path.
func rawConnOf(conn net.Conn) syscall.RawConn { return nil }

func (pc *h1Conn) writeAwait(p []byte) (int, error) { return pc.conn.Write(p) }

// awaitState is empty where writeAwait is not available.
type awaitState struct{}
