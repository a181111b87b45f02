package h3conn

import (
	"context"
	"crypto/tls"
	"errors"
	"net"
	"net/http/httptrace"
	"net/netip"
	"time"

	"github.com/quic-go/quic-go"
)

// errNotStreamConn is what the net.Conn handed to GotConn returns for I/O:
// an HTTP/3 connection is not a byte stream.
var errNotStreamConn = errors.New("h3conn: a QUIC connection has no byte-stream I/O")

// traceConn is the net.Conn given to httptrace GotConn. Its addresses are the
// QUIC connection's; Read, Write, Close and deadlines fail instead of
// panicking (quic-go's own stand-in panics), so a hook that pokes at it
// cannot crash the program or close a shared connection.
type traceConn struct{ q *quic.Conn }

func (c traceConn) Read([]byte) (int, error)         { return 0, errNotStreamConn }
func (c traceConn) Write([]byte) (int, error)        { return 0, errNotStreamConn }
func (c traceConn) Close() error                     { return errNotStreamConn }
func (c traceConn) LocalAddr() net.Addr              { return c.q.LocalAddr() }
func (c traceConn) RemoteAddr() net.Addr             { return c.q.RemoteAddr() }
func (c traceConn) SetDeadline(time.Time) error      { return errNotStreamConn }
func (c traceConn) SetReadDeadline(time.Time) error  { return errNotStreamConn }
func (c traceConn) SetWriteDeadline(time.Time) error { return errNotStreamConn }

// lookupWithTrace resolves host with the default resolver, firing the DNS
// hooks as net/http does when it resolves.
func lookupWithTrace(ctx context.Context, host string) ([]netip.Addr, error) {
	trace := httptrace.ContextClientTrace(ctx)
	if trace != nil && trace.DNSStart != nil {
		trace.DNSStart(httptrace.DNSStartInfo{Host: host})
	}
	addrs, err := net.DefaultResolver.LookupNetIP(ctx, "ip", host)
	if trace != nil && trace.DNSDone != nil {
		info := httptrace.DNSDoneInfo{Err: err}
		for _, a := range addrs {
			info.Addrs = append(info.Addrs, net.IPAddr{IP: a.AsSlice(), Zone: a.Zone()})
		}
		trace.DNSDone(info)
	}
	return addrs, err
}

func traceConnectStart(trace *httptrace.ClientTrace, addr string) {
	if trace != nil && trace.ConnectStart != nil {
		trace.ConnectStart("udp", addr)
	}
	if trace != nil && trace.TLSHandshakeStart != nil {
		trace.TLSHandshakeStart()
	}
}

func traceConnectDone(trace *httptrace.ClientTrace, addr string, q *quic.Conn, err error) {
	if trace == nil {
		return
	}
	if trace.TLSHandshakeDone != nil {
		var state tls.ConnectionState
		if q != nil {
			state = q.ConnectionState().TLS
		}
		trace.TLSHandshakeDone(state, err)
	}
	if trace.ConnectDone != nil {
		trace.ConnectDone("udp", addr, err)
	}
}
