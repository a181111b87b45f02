package transport

import (
	"context"
	"crypto/tls"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"
)

// A request body that streams (a pipe the caller feeds while the exchange
// runs): net/http sends the head at once and each piece of the body as the
// body yields it (each chunk, or each read of a body with a declared
// length), so a server that answers after the first piece (a
// bidirectional stream, an upload the server acknowledges as it goes)
// gets it. The body stays open until the answer came back.
func TestH1StreamingBodyFlushed(t *testing.T) {
	for _, useTLS := range []bool{false, true} {
		for _, declared := range []int64{-1, 8} {
			for _, impl := range []string{"nethttp", "ferry"} {
				name := impl + "/" + h1Framing(declared)
				if useTLS {
					name += "/tls"
				}
				t.Run(name, func(t *testing.T) {
					srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
						// Answer before the body ended (the server otherwise
						// reads the rest of the body before the answer).
						http.NewResponseController(w).EnableFullDuplex()
						buf := make([]byte, 4)
						io.ReadFull(r.Body, buf)
						w.Header().Set("X-First", string(buf))
						w.WriteHeader(200)
						w.(http.Flusher).Flush()
						io.Copy(w, r.Body)
					}))
					var tlsCfg *tls.Config
					if useTLS {
						srv.StartTLS()
						tlsCfg = srv.Client().Transport.(*http.Transport).TLSClientConfig
					} else {
						srv.Start()
					}
					defer srv.Close()
					rt := settings{}.nethttp(tlsCfg)
					if impl == "ferry" {
						rt = settings{}.ferry(tlsCfg)
					}
					defer closeIdle(rt)
					pr, pw := io.Pipe()
					defer pw.Close() // net/http waits for its writer before it returns an error
					ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
					defer cancel()
					req, _ := http.NewRequestWithContext(ctx, "POST", srv.URL, pr)
					req.ContentLength = declared
					go pw.Write([]byte("ping"))
					resp, err := rt.RoundTrip(req)
					if err != nil {
						pw.Close()
						t.Fatalf("the answer to the first piece never came: %v", err)
					}
					defer resp.Body.Close()
					if got := resp.Header.Get("X-First"); got != "ping" {
						t.Errorf("X-First %q", got)
					}
					go func() { pw.Write([]byte("pong")); pw.Close() }()
					rest, err := io.ReadAll(resp.Body)
					if string(rest) != "pong" || err != nil {
						t.Errorf("rest %q %v", rest, err)
					}
					if resp.ProtoMajor != 1 {
						t.Errorf("protocol %s, want HTTP/1.1", resp.Proto)
					}
				})
			}
		}
	}
}

// h1Framing names the request framing a declared length gives.
func h1Framing(declared int64) string {
	if declared < 0 {
		return "chunked"
	}
	return "content-length"
}
