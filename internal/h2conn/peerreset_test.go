package h2conn

import (
	"bytes"
	"fmt"
	"testing"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
)

// TestPeerProtocolResetRealErrors: peerProtocolReset recognises
// the errors Conn really returns for an RST_STREAM from the server, before
// the response headers (RoundTrip's error) and after them (the body's
// Read), on both connections and in both modes of x/net's: with Go 1.27 they are net/http's internal
// StreamError, which only converts through its As method (errors.AsType
// must take that path, 6c8cc2b). Only PROTOCOL_ERROR counts. On Go 1.27
// nothing else observable depends on it (wrapped mode's Usable asks State
// at once and the toolchain does not retry), so only this check fails when
// the As path is lost there.
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
				if got, want := peerProtocolReset(err), code == http2.ErrCodeProtocol; got != want {
					t.Fatalf("peerProtocolReset(%v (%T)) = %v, want %v", err, err, got, want)
				}
			})
		}
	}
}
