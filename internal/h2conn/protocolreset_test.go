package h2conn

import (
	"bytes"
	"errors"
	"strings"
	"testing"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
)

// writeBadHeaderResponse answers streamID with a response header whose
// name is not a valid field name, which the client rejects itself with a
// PROTOCOL_ERROR stream error (not received from the peer).
func writeBadHeaderResponse(fr *http2.Framer, streamID uint32) error {
	var buf bytes.Buffer
	enc := hpack.NewEncoder(&buf)
	enc.WriteField(hpack.HeaderField{Name: ":status", Value: "200"})
	enc.WriteField(hpack.HeaderField{Name: "  content-type", Value: "bogus"})
	return fr.WriteHeaders(http2.HeadersFrameParam{StreamID: streamID, BlockFragment: buf.Bytes(), EndHeaders: true})
}

// TestProtocolErrorReset: a request whose stream the server resets with
// PROTOCOL_ERROR before the response headers is returned as retryable
// (ReasonProtocolReset, body not known to be unread) where the toolchain's
// net/http retries it, Go 1.26 (golang/go#47635), and as a stream error
// where it does not, Go 1.27. Either way the connection takes no new
// stream, as net/http does, so a retry goes to
// another one. Other reset codes, and a PROTOCOL_ERROR the client found
// itself in the response, are never retried.
func TestProtocolErrorReset(t *testing.T) {
	for _, tc := range []struct {
		name      string
		method    string
		reply     func(fr *http2.Framer, id uint32) error
		code      http2.ErrCode
		retryable bool
		usable    bool
	}{
		{"protocol_error_get", "GET", func(fr *http2.Framer, id uint32) error {
			return fr.WriteRSTStream(id, http2.ErrCodeProtocol)
		}, http2.ErrCodeProtocol, protocolResetRetriedByToolchain, false},
		{"protocol_error_post", "POST", func(fr *http2.Framer, id uint32) error {
			return fr.WriteRSTStream(id, http2.ErrCodeProtocol)
		}, http2.ErrCodeProtocol, protocolResetRetriedByToolchain, false},
		{"internal_error", "GET", func(fr *http2.Framer, id uint32) error {
			return fr.WriteRSTStream(id, http2.ErrCodeInternal)
		}, http2.ErrCodeInternal, false, true},
		{"bad_response_header", "GET", writeBadHeaderResponse, http2.ErrCodeProtocol, false, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rs := startRawServer(t, tc.reply)
			c, err := NewClientConn(dialH2(t, rs.Addr(), false), Config{})
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			req := newRequest(t, tc.method, "http://"+rs.Addr()+"/", nil)
			if tc.method == "POST" {
				req = newRequest(t, tc.method, "http://"+rs.Addr()+"/", strings.NewReader("payload"))
			}
			_, err = c.RoundTrip(req)
			var se http2.StreamError
			if !errors.As(err, &se) || se.Code != tc.code {
				t.Fatalf("err = %v, want a %v stream error", err, tc.code)
			}
			if IsRetryable(err) != tc.retryable {
				t.Fatalf("IsRetryable(%v) = %v, want %v", err, IsRetryable(err), tc.retryable)
			}
			var np *NotProcessedError
			if tc.retryable && (!errors.As(err, &np) || np.Reason != ReasonProtocolReset || np.BodyUnread) {
				t.Fatalf("err = %#v, want ReasonProtocolReset with the body not known unread", err)
			}
			if !tc.retryable && errors.As(err, &np) {
				t.Fatalf("err = %#v, want the stream error", err)
			}
			if _, idle := c.IdleSince(); !idle {
				t.Fatal("slot leaked")
			}
			if c.Usable() != tc.usable {
				t.Fatalf("Usable() = %v, want %v", c.Usable(), tc.usable)
			}
		})
	}
}

// TestProtocolResetMidBody: an RST_STREAM(PROTOCOL_ERROR) from the server
// after the response headers reaches the caller through the body's Read,
// and the connection then takes no new stream, as net/http's: Usable is
// false as soon as the Read returns, and no slot stays in use. Another reset code leaves the connection
// usable.
func TestProtocolResetMidBody(t *testing.T) {
	for _, tc := range []struct {
		name   string
		code   http2.ErrCode
		usable bool
	}{
		{"protocol_error", http2.ErrCodeProtocol, false},
		{"internal_error", http2.ErrCodeInternal, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rs := startRawServer(t, func(fr *http2.Framer, id uint32) error {
				var buf bytes.Buffer
				enc := hpack.NewEncoder(&buf)
				enc.WriteField(hpack.HeaderField{Name: ":status", Value: "200"})
				if err := fr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: buf.Bytes(), EndHeaders: true}); err != nil {
					return err
				}
				if err := fr.WriteData(id, false, []byte("partial")); err != nil {
					return err
				}
				return fr.WriteRSTStream(id, tc.code)
			})
			c, err := NewClientConn(dialH2(t, rs.Addr(), false), Config{})
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			resp, err := c.RoundTrip(newRequest(t, "GET", "http://"+rs.Addr()+"/", nil))
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			var got bytes.Buffer
			_, err = got.ReadFrom(resp.Body)
			var se http2.StreamError
			if !errors.As(err, &se) || se.Code != tc.code {
				t.Fatalf("body read: %q, %v; want a %v stream error", got.String(), err, tc.code)
			}
			if _, idle := c.IdleSince(); !idle {
				t.Fatal("slot leaked")
			}
			if c.Usable() != tc.usable {
				t.Fatalf("Usable() = %v right after the Read, want %v", c.Usable(), tc.usable)
			}
		})
	}
}
