package proxydial

import "net"

// prefixConn is a tunnel whose first bytes were already read from the
// proxy connection together with the CONNECT response; Read returns them
// before reading the connection again. Like any net.Conn it supports one
// reader at a time.
type prefixConn struct {
	net.Conn
	prefix []byte // not yet returned to the reader; nil once drained
}

func (c *prefixConn) Read(p []byte) (int, error) {
	if len(c.prefix) > 0 {
		n := copy(p, c.prefix)
		c.prefix = c.prefix[n:]
		if len(c.prefix) == 0 {
			c.prefix = nil
		}
		return n, nil
	}
	return c.Conn.Read(p)
}

// NetConn returns the connection to the proxy (as tls.Conn.NetConn does), so
// that a caller can reach the socket, for example to set options on it.
func (c *prefixConn) NetConn() net.Conn { return c.Conn }
