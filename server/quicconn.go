package server

import (
	"errors"
	"net"
	"time"

	"github.com/quic-go/quic-go"
	"github.com/quic-go/quic-go/http3"
)

// errQUICView is what the byte-stream methods of the QUIC views return.
var errQUICView = errors.New("server: a QUIC connection carries streams, not bytes; use QUICConn.Conn")

// QUICConn is the net.Conn that http.Server.ConnContext and ConnState
// receive for an HTTP/3 connection. Only its addresses and Close are
// meaningful: Read, Write and the deadline methods fail, since a QUIC
// connection multiplexes streams. Type-assert to *QUICConn and call Conn
// for the underlying *quic.Conn.
type QUICConn struct {
	conn *quic.Conn
}

// Conn returns the underlying QUIC connection.
func (c *QUICConn) Conn() *quic.Conn { return c.conn }

// Read fails: read the request body in the handler instead.
func (c *QUICConn) Read([]byte) (int, error) { return 0, errQUICView }

// Write fails: write through the handler's ResponseWriter instead.
func (c *QUICConn) Write([]byte) (int, error) { return 0, errQUICView }

// Close closes the QUIC connection with H3_NO_ERROR.
func (c *QUICConn) Close() error {
	return c.conn.CloseWithError(quic.ApplicationErrorCode(http3.ErrCodeNoError), "")
}

// LocalAddr returns the server's UDP address.
func (c *QUICConn) LocalAddr() net.Addr { return c.conn.LocalAddr() }

// RemoteAddr returns the client's UDP address.
func (c *QUICConn) RemoteAddr() net.Addr { return c.conn.RemoteAddr() }

// SetDeadline fails; deadlines apply to streams, not to the connection.
func (c *QUICConn) SetDeadline(time.Time) error { return errQUICView }

// SetReadDeadline fails; see SetDeadline.
func (c *QUICConn) SetReadDeadline(time.Time) error { return errQUICView }

// SetWriteDeadline fails; see SetDeadline.
func (c *QUICConn) SetWriteDeadline(time.Time) error { return errQUICView }
