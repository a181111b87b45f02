package h2conn

import (
	"bytes"
	"errors"
	"fmt"
	"testing"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
)

// TestPeerProtocolResetRealErrors: an RST_STREAM from the server, before
// the response headers (RoundTrip's error) and after them (the body's
// Read), reaches the caller as an http2.StreamError with the server's
// code, as callers of net/http test it.
func TestPeerProtocolResetRealErrors(t *testing.T) {
	for _, code := range []http2.ErrCode{http2.ErrCodeProtocol, http2.ErrCodeInternal} {
		for _, afterHeaders := range []bool{false, true} {
			t.Run(fmt.Sprintf("%v/after_headers_%v", code, afterHeaders), func(t *testing.T) {
				rs := startRawServer(t, func(fr *http2.Framer, id uint32) error {
					if afterHeaders {
						var buf bytes.Buffer
						hpack.NewEncoder(&buf).WriteField(hpack.HeaderField{Name: ":status", Value: "200"})
						if err := fr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: buf.Bytes(), EndHeaders: true}); err != nil {
							return err
						}
						if err := fr.WriteData(id, false, []byte("partial")); err != nil {
							return err
						}
					}
					return fr.WriteRSTStream(id, code)
				})
				c, err := NewClientConn(dialH2(t, rs.Addr(), false), Config{})
				if err != nil {
					t.Fatal(err)
				}
				defer c.Close()
				resp, err := c.RoundTrip(newRequest(t, "GET", "http://"+rs.Addr()+"/", nil))
				if afterHeaders {
					if err != nil {
						t.Fatalf("RoundTrip: %v, want the headers", err)
					}
					var got bytes.Buffer
					_, err = got.ReadFrom(resp.Body)
					resp.Body.Close()
				}
				if err == nil {
					t.Fatal("no error from the reset stream")
				}
				if se, ok := errors.AsType[http2.StreamError](err); !ok || se.Code != code {
					t.Fatalf("error %v (%T), want an http2.StreamError with %v", err, err, code)
				}
			})
		}
	}
}
