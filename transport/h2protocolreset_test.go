package transport

import (
	"bytes"
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/ferryhttp/ferry/internal/h2conn"
	"github.com/ferryhttp/ferry/internal/testpeer"
	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
)

// A PROTOCOL_ERROR reset from the server before the response headers:
// Go 1.26's net/http sends the request again (on a new connection) when its
// body can be sent again; Go 1.27's returns the stream error. ferry follows
// the toolchain it is built with (protocolResetRetried), and unlike net/http
// 1.26, which retries such a request without limit, counts these retries
// with its others.

func resetFirstStreamProtocol(conn, stream int, fr *http2.Framer, id uint32) error {
	if conn == 0 && stream == 0 {
		return fr.WriteRSTStream(id, http2.ErrCodeProtocol)
	}
	return testpeer.H2OK(fr, id)
}

// TestH2ProtocolResetBodiesMatchNetHTTP: which requests go out again after
// such a reset, beside net/http.
func TestH2ProtocolResetBodiesMatchNetHTTP(t *testing.T) {
	rows := []struct {
		name string
		req  func(t *testing.T, url string) *http.Request
	}{
		{"get", func(t *testing.T, u string) *http.Request { return newReq(t, "GET", u, nil) }},
		{"post-nobody", func(t *testing.T, u string) *http.Request {
			r := newReq(t, "POST", u, nil)
			r.Body = http.NoBody
			return r
		}},
		{"post-getbody", func(t *testing.T, u string) *http.Request { return newReq(t, "POST", u, strings.NewReader("payload")) }},
		{"post-stream", func(t *testing.T, u string) *http.Request {
			return newReq(t, "POST", u, &streamBody{strings.NewReader("payload")})
		}},
	}
	for _, row := range rows {
		t.Run(row.name, func(t *testing.T) {
			compareImpls(t, func(t *testing.T, impl string) []any {
				s := testpeer.StartH2(t, testpeer.H2Script{OnHeaders: resetFirstStreamProtocol})
				o := observe(implH2c(t, impl), row.req(t, "http://"+s.Addr()+"/"))
				conns, streams := s.Counts()
				return []any{o.Status, o.Body, o.Err, conns, streams}
			})
		})
	}
}

// TestH2ProtocolResetAfterHeaders: a reset after the response headers is an
// error reading the body, never a retry.
func TestH2ProtocolResetAfterHeaders(t *testing.T) {
	compareImpls(t, func(t *testing.T, impl string) []any {
		s := testpeer.StartH2(t, testpeer.H2Script{OnHeaders: func(conn, stream int, fr *http2.Framer, id uint32) error {
			var buf bytes.Buffer
			hpack.NewEncoder(&buf).WriteField(hpack.HeaderField{Name: ":status", Value: "200"})
			if err := fr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: buf.Bytes(), EndHeaders: true}); err != nil {
				return err
			}
			if err := fr.WriteData(id, false, []byte("par")); err != nil {
				return err
			}
			return fr.WriteRSTStream(id, http2.ErrCodeProtocol)
		}})
		o := observe(implH2c(t, impl), newReq(t, "GET", "http://"+s.Addr()+"/", nil))
		conns, streams := s.Counts()
		return []any{o.Status, o.BodyErr, o.Err, conns, streams}
	})
}

// TestH2ProtocolResetAlwaysCapped: against a server that resets every
// stream, a Go 1.26 build makes 8 attempts (each on a new connection, as
// x/net stops using a connection after such a reset) and returns the stream
// error itself; a Go 1.27 build makes one.
func TestH2ProtocolResetAlwaysCapped(t *testing.T) {
	s := testpeer.StartH2(t, testpeer.H2Script{OnHeaders: func(conn, stream int, fr *http2.Framer, id uint32) error {
		return fr.WriteRSTStream(id, http2.ErrCodeProtocol)
	}})
	tr := h2cTransport()
	tr.h2.backoffUnit = time.Nanosecond
	defer tr.CloseIdleConnections()
	// Without the cap the request loops until this deadline.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err := tr.RoundTrip(newReq(t, "GET", "http://"+s.Addr()+"/", nil).WithContext(ctx))
	var se http2.StreamError
	var np *h2conn.NotProcessedError
	if !errors.As(err, &se) || se.Code != http2.ErrCodeProtocol || errors.As(err, &np) {
		t.Fatalf("err = %v, want the PROTOCOL_ERROR stream error itself", err)
	}
	want := 1
	if protocolResetRetried {
		want = 8
	}
	if conns, streams := s.Counts(); conns != want || streams != want {
		t.Fatalf("%d connections, %d streams; want %d of each", conns, streams, want)
	}
}
