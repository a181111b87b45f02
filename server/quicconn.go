package server

import (
	"context"
	"errors"
	"net"
	"sync"
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

// quicConns is the set of open HTTP/3 connections, so that Close can end
// them with CONNECTION_CLOSE (closing the quic.Transport alone drops them
// silently, and clients would wait for their idle timeout). It costs a map
// insert and delete per connection, nothing per request.
type quicConns struct {
	mu    sync.Mutex // guards conns
	conns map[*quic.Conn]struct{}
}

// add records c until its context ends (the connection closed).
func (q *quicConns) add(c *quic.Conn) {
	q.mu.Lock()
	if q.conns == nil {
		q.conns = make(map[*quic.Conn]struct{})
	}
	q.conns[c] = struct{}{}
	q.mu.Unlock()
	context.AfterFunc(c.Context(), func() {
		q.mu.Lock()
		delete(q.conns, c)
		q.mu.Unlock()
	})
}

// closeAll closes every recorded connection with H3_NO_ERROR; the closes
// run outside the lock.
func (q *quicConns) closeAll() {
	q.mu.Lock()
	open := make([]*quic.Conn, 0, len(q.conns))
	for c := range q.conns {
		open = append(open, c)
	}
	q.mu.Unlock()
	for _, c := range open {
		c.CloseWithError(quic.ApplicationErrorCode(http3.ErrCodeNoError), "")
	}
}
