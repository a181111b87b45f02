package server

import (
	"io"
	"log"
	"net/http"
	"strings"
	"testing"
)

// TestMaxHeaderBytesMatchesHTTP2 checks that HTTP/3 enforces MaxHeaderBytes
// as net/http's HTTP/2 server does (MaxHeaderBytes plus 320 bytes of
// per-field allowance): a header HTTP/2 accepts is accepted over HTTP/3 and
// one HTTP/2 refuses is refused. HTTP/1.1, which reads MaxHeaderBytes +
// 4096 bytes, is shown for comparison.
func TestMaxHeaderBytesMatchesHTTP2(t *testing.T) {
	const maxHeaderBytes = 4096
	// HTTP/2 refusals are connection errors net/http logs; they are expected.
	quiet := log.New(io.Discard, "", 0)
	st := startTLS(t, &http.Server{Handler: echoProto, MaxHeaderBytes: maxHeaderBytes, ErrorLog: quiet}, nil)
	// accepted reports whether a request with one X-Big header of n bytes
	// is served over p.
	accepted := func(t *testing.T, p protocol, n int) bool {
		req, _ := http.NewRequest("GET", st.url("/"), nil)
		req.Header.Set("X-Big", strings.Repeat("a", n))
		resp, err := newClient(t, p).Do(req)
		if err != nil {
			return false // a client may refuse it against the server's SETTINGS
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	}
	rows := []struct {
		size    int
		wantH2  bool // what net/http's HTTP/2 server does, to keep the row meaningful
		wantH11 bool
	}{
		{3000, true, true},
		{4000, true, true},  // within MaxHeaderBytes + 320 with the client's other fields
		{5000, false, true}, // beyond HTTP/2's limit, within HTTP/1.1's
	}
	for _, row := range rows {
		gotH2 := accepted(t, h2, row.size)
		if gotH2 != row.wantH2 {
			t.Fatalf("%d-byte header over HTTP/2: accepted %v, want %v (net/http's limit changed?)", row.size, gotH2, row.wantH2)
		}
		if got := accepted(t, h1, row.size); got != row.wantH11 {
			t.Errorf("%d-byte header over HTTP/1.1: accepted %v, want %v", row.size, got, row.wantH11)
		}
		if got := accepted(t, h3, row.size); got != gotH2 {
			t.Errorf("%d-byte header over HTTP/3: accepted %v, HTTP/2 accepted %v", row.size, got, gotH2)
		}
	}
}

// TestHTTP3MaxHeaderBytesDefault checks the limit handed to quic-go,
// including the zero value's default, against HTTP/2's rule.
func TestHTTP3MaxHeaderBytesDefault(t *testing.T) {
	rows := []struct{ set, want int }{
		{0, http.DefaultMaxHeaderBytes + 320},
		{-1, http.DefaultMaxHeaderBytes + 320},
		{4096, 4096 + 320},
	}
	for _, row := range rows {
		h3 := newHTTP3Server(&http.Server{MaxHeaderBytes: row.set}, http.NotFoundHandler(), &quicConns{})
		if h3.MaxHeaderBytes != row.want {
			t.Errorf("MaxHeaderBytes %d: HTTP/3 limit %d, want %d", row.set, h3.MaxHeaderBytes, row.want)
		}
	}
}
