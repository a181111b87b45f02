package transport

import (
	"io"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"testing"

	"github.com/ferryhttp/ferry/internal/selfsigned"
)

// Over HTTP/2 negotiated by default, whether resp.Request is the caller's
// request follows net/http's rule: the requests that find an HTTP/2
// connection already pooled go through net/http's registered HTTP/2 round
// tripper with the request copy that tracks its body (setupRewindBody), so
// resp.Request is that copy when the request has a body other than
// http.NoBody, and the caller's request otherwise. A request that dials
// (the first) gets the caller's request back.
func TestH2ResponseRequestIdentityMatchesNetHTTP(t *testing.T) {
	cert, err := selfsigned.New("127.0.0.1")
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		io.WriteString(w, r.Proto)
	}))
	srv.EnableHTTP2 = true
	srv.TLS = cert.ServerConfig()
	srv.StartTLS()
	defer srv.Close()

	bodies := []struct {
		name string
		body func() io.Reader
	}{
		{"nil", func() io.Reader { return nil }},
		{"NoBody", func() io.Reader { return http.NoBody }},
		{"strings.Reader", func() io.Reader { return strings.NewReader("abc") }},
		{"stream", func() io.Reader { return &streamBody{strings.NewReader("abc")} }},
	}
	for _, method := range []string{"GET", "POST"} {
		for _, b := range bodies {
			t.Run(method+"/"+b.name, func(t *testing.T) {
				var got [2][]string
				for i := range got {
					base := &http.Transport{TLSClientConfig: cert.ClientConfig(), ForceAttemptHTTP2: true}
					var rt http.RoundTripper = base
					if i == 1 {
						rt = From(base)
					}
					for n := 0; n < 3; n++ {
						req := newReq(t, method, srv.URL, b.body())
						resp, err := rt.RoundTrip(req)
						if err != nil {
							t.Fatal(err)
						}
						body, _ := io.ReadAll(resp.Body)
						resp.Body.Close()
						same := "caller's"
						if resp.Request != req {
							same = "another"
							if resp.Request == nil || resp.Request.URL != req.URL || !reflect.DeepEqual(resp.Request.Header, req.Header) || resp.Request.Method != req.Method {
								same = "another, not a copy"
							}
						}
						got[i] = append(got[i], string(body)+" "+same)
					}
					closeIdle(rt)
				}
				if !reflect.DeepEqual(got[0], got[1]) {
					t.Errorf("resp.Request per request\nnet/http: %q\nferry:    %q", got[0], got[1])
				}
			})
		}
	}
}
