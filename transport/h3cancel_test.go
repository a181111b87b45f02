package transport

import (
	"errors"
	"io"
	"net/http"
	"testing"
	"time"
)

// TestH3CancelRequest: the deprecated Transport.CancelRequest cancels an
// HTTP/3 request as it cancels an HTTP/1.1 one (HTTP/3 replaced such a
// request transparently), while it waits for the response head and while
// its body is read, with net/http's "request canceled" error. The
// connection stays usable for the next request, and the registration is
// gone once the request ended. (HTTP/2 requests are not cancelled by it,
// as in net/http; doc.go says so.)
func TestH3CancelRequest(t *testing.T) {
	for _, proto := range []string{"HTTP/1.1", "HTTP/3.0"} {
		for _, phase := range []string{"head", "body"} {
			t.Run(proto+"_"+phase, func(t *testing.T) {
				arrived := make(chan struct{}, 1)
				release := make(chan struct{})
				defer close(release)
				h := &protoHandler{extra: func(w http.ResponseWriter, r *http.Request) bool {
					switch r.URL.Path {
					case "/body":
						io.WriteString(w, "first")
						w.(http.Flusher).Flush()
					case "/head":
					default:
						return false
					}
					arrived <- struct{}{}
					select {
					case <-r.Context().Done():
					case <-release:
					}
					return true
				}}
				u := startTLS(t, h)
				tr := newH3Transport(t, func(tr *Transport) { tr.h3.headStart = time.Minute })
				if proto == "HTTP/3.0" {
					port, _ := startH3(t, h, nil)
					advertise(t, tr.altSvcCache(), u, altValue("", port))
				}

				req, err := http.NewRequest("GET", u+"/"+phase, nil)
				if err != nil {
					t.Fatal(err)
				}
				type result struct {
					resp *http.Response
					err  error
				}
				done := make(chan result, 1)
				go func() {
					resp, err := tr.RoundTrip(req)
					done <- result{resp, err}
				}()
				<-arrived
				var err2 error
				if phase == "head" {
					tr.CancelRequest(req)
					var res result
					select {
					case res = <-done:
					case <-time.After(10 * time.Second):
						t.Fatal("CancelRequest did not end the request") // release ends it
					}
					if res.err == nil {
						res.resp.Body.Close()
						t.Fatalf("request answered (%s) after CancelRequest", res.resp.Proto)
					}
					err2 = res.err
				} else {
					res := <-done
					if res.err != nil {
						t.Fatal(res.err)
					}
					if res.resp.Proto != proto {
						t.Fatalf("proto %s, want %s", res.resp.Proto, proto)
					}
					buf := make([]byte, 5)
					if _, err := io.ReadFull(res.resp.Body, buf); err != nil || string(buf) != "first" {
						t.Fatalf("first body bytes %q %v", buf, err)
					}
					tr.CancelRequest(req)
					read := make(chan error, 1)
					go func() { _, err := io.ReadAll(res.resp.Body); read <- err }()
					select {
					case err2 = <-read:
					case <-time.After(10 * time.Second):
						res.resp.Body.Close() // ends the read
						<-read
						t.Fatal("CancelRequest did not end the body read")
					}
					res.resp.Body.Close()
				}
				if !errors.Is(err2, errRequestCanceled) {
					t.Fatalf("error %v, want %v", err2, errRequestCanceled)
				}
				if n := registered(tr); n != 0 {
					t.Fatalf("%d requests left in the CancelRequest registry", n)
				}
				// Cancelling an ended request does nothing; the next one works.
				tr.CancelRequest(req)
				if resp, _ := fetch(t, tr, "GET", u, nil); resp.Proto != proto {
					t.Fatalf("next request over %s, want %s", resp.Proto, proto)
				}
			})
		}
	}
}

// registered counts the requests in tr's CancelRequest registry.
func registered(tr *Transport) int { return tr.cancels.Len() }
