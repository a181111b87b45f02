package transport

import (
	"bytes"
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// idleWatchStates returns the scheduler state ("IO wait", "runnable"...)
// of every goroutine running an idle connection's read (idlewatch.go).
func idleWatchStates() []string {
	buf := make([]byte, 1<<20)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) {
			buf = buf[:n]
			break
		}
		buf = make([]byte, 2*len(buf))
	}
	var states []string
	for _, g := range bytes.Split(buf, []byte("\n\n")) {
		// A goroutine that has not run yet shows the wrapper the go
		// statement made (watchIdle.gowrap1), not readWhileIdle.
		if !bytes.Contains(g, []byte("h1conn.(*Conn).readWhileIdle")) && !bytes.Contains(g, []byte("h1conn.(*Conn).watchIdle.gowrap")) {
			continue
		}
		head, _, _ := bytes.Cut(g, []byte("\n"))
		if i := bytes.IndexByte(head, '['); i >= 0 {
			state, _, _ := bytes.Cut(head[i+1:], []byte("]"))
			states = append(states, string(state))
		}
	}
	return states
}

// awaitIdleWatchReads waits until every idle connection's read has reached
// its socket: the goroutine waits in the poller ("IO wait"), or has
// returned. A request that takes a connection before then finds nothing
// (idlewatch.go: the read had not begun), which the tests waiting here do
// not mean to check.
func awaitIdleWatchReads(t *testing.T) {
	t.Helper()
	eventually(t, "idle reads waiting on their sockets", func() bool {
		for _, st := range idleWatchStates() {
			if !strings.HasPrefix(st, "IO wait") {
				return false
			}
		}
		return true
	})
}

// hidingDialer dials TCP and hides the socket behind a wrapper without
// SyscallConn, as a DialContext that counts bytes or adds tracing does; it
// counts the connections it made in dials, when not nil.
func hidingDialer(dials *atomic.Int32) func(ctx context.Context, network, addr string) (net.Conn, error) {
	var d net.Dialer
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := d.DialContext(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		if dials != nil {
			dials.Add(1)
		}
		return wrappedConn{c}, nil
	}
}

// TestIdleWatchReuse: a connection whose socket is hidden is read by a
// goroutine each time it goes idle, and that read is stopped with a
// deadline each time a request takes it. Over many such rounds, back to
// back and after pauses, plain and over TLS (where a read that timed out
// must leave tls.Conn usable), every request gets its own response on the
// one connection, and no reading goroutine outlives the connections.
func TestIdleWatchReuse(t *testing.T) {
	for _, useTLS := range []bool{false, true} {
		name := "http"
		if useTLS {
			name = "https"
		}
		t.Run(name, func(t *testing.T) {
			stressLeakCheck(t, func(t *testing.T) {
				h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
					b, _ := io.ReadAll(r.Body)
					io.WriteString(w, r.Method+" "+r.URL.Path+" "+string(b))
				})
				var srv *httptest.Server
				if useTLS {
					srv = httptest.NewTLSServer(h)
				} else {
					srv = httptest.NewServer(h)
				}
				defer srv.Close()
				var dials atomic.Int32
				std := &http.Transport{DialContext: hidingDialer(&dials)}
				if useTLS {
					std.TLSClientConfig = srv.Client().Transport.(*http.Transport).TLSClientConfig
				}
				ft := From(std)
				ft.DisableHTTP3 = true
				defer ft.CloseIdleConnections()
				for i := range 40 {
					method, body := "GET", ""
					if i%2 == 1 {
						method, body = "POST", "p"+strings.Repeat("x", i)
					}
					if i%10 == 9 {
						awaitIdleWatchReads(t) // the read is waiting on the socket
					}
					req, _ := http.NewRequest(method, srv.URL+"/"+string(rune('a'+i%26)), strings.NewReader(body))
					if method == "GET" {
						req.Body = nil
					}
					resp, err := ft.RoundTrip(req)
					if err != nil {
						t.Fatalf("request %d: %v", i, err)
					}
					got, err := io.ReadAll(resp.Body)
					resp.Body.Close()
					want := method + " /" + string(rune('a'+i%26)) + " " + body
					if err != nil || string(got) != want {
						t.Fatalf("request %d: %q, %v; want %q", i, got, err, want)
					}
				}
				if n := dials.Load(); n != 1 {
					t.Fatalf("%d connections dialled, want 1", n)
				}
				eventually(t, "one idle read, for the one idle connection", func() bool { return len(idleWatchStates()) == 1 })
			})
		})
	}
}

// TestIdleWatchEndsWithConnection: the pool closing an idle hidden-socket
// connection (IdleConnTimeout, CloseIdleConnections, a Put it does not
// keep) ends its read.
func TestIdleWatchEndsWithConnection(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok") }))
	defer srv.Close()
	get := func(t *testing.T, rt http.RoundTripper) {
		t.Helper()
		req, _ := http.NewRequest("GET", srv.URL, nil)
		resp, err := rt.RoundTrip(req)
		if err != nil {
			t.Fatal(err)
		}
		io.ReadAll(resp.Body)
		resp.Body.Close()
	}
	none := func() bool { return len(idleWatchStates()) == 0 }
	// The connection goes idle as the body ends, maybe after Close returns.
	one := func() bool { return len(idleWatchStates()) == 1 }
	t.Run("IdleConnTimeout", func(t *testing.T) {
		var dials atomic.Int32
		ft := From(&http.Transport{DialContext: hidingDialer(&dials), IdleConnTimeout: 20 * time.Millisecond})
		ft.DisableHTTP3 = true
		defer ft.CloseIdleConnections()
		get(t, ft)
		eventually(t, "an idle read for the idle connection", one)
		eventually(t, "the expired connection's read to end", none)
	})
	t.Run("CloseIdleConnections", func(t *testing.T) {
		var dials atomic.Int32
		ft := From(&http.Transport{DialContext: hidingDialer(&dials)})
		ft.DisableHTTP3 = true
		get(t, ft)
		eventually(t, "an idle read for the idle connection", one)
		ft.CloseIdleConnections()
		eventually(t, "the closed connection's read to end", none)
	})
	t.Run("MaxIdleConnsPerHost", func(t *testing.T) {
		// Two connections at once, one idle place: the second Put is
		// refused and its connection closed.
		var dials atomic.Int32
		ft := From(&http.Transport{DialContext: hidingDialer(&dials), MaxIdleConnsPerHost: 1})
		ft.DisableHTTP3 = true
		defer ft.CloseIdleConnections()
		var resps []*http.Response
		for range 2 {
			req, _ := http.NewRequest("GET", srv.URL, nil)
			resp, err := ft.RoundTrip(req)
			if err != nil {
				t.Fatal(err)
			}
			resps = append(resps, resp)
		}
		for _, resp := range resps {
			io.ReadAll(resp.Body)
			resp.Body.Close()
		}
		if n := dials.Load(); n != 2 {
			t.Fatalf("%d dials, want 2", n)
		}
		eventually(t, "one idle read, for the one idle connection", one)
		ft.CloseIdleConnections()
		eventually(t, "no idle read", none)
	})
}
