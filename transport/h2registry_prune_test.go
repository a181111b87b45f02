package transport

import (
	"context"
	"io"
	"net/http"
	"sync"
	"testing"
)

// The interleaving behind TestCancelStorm/h2_DisableKeepAlives'
// leftover connections, made deterministic. With DisableKeepAlives every
// HTTP/2 connection carries one request, yet sits in the pool's shared
// list (and the registry CloseIdleConnections walks) from its dial on.
// When its response body is closed, or its context cancelled while a Read
// waits on it, the connection dies and closes at once, but stays listed in
// the pool until some GetShared for its key walks past it. If, before
// that, another request's dial adds a connection to the registry and the
// registry prunes its dead entries, a pruned connection left only the
// registry: CloseIdleConnections, which finds pooled HTTP/2 connections
// through the registry, never saw it again, and Stats counted it as open
// for good. Here the bodies are ended inside the next dial (the
// beforeFirstStream hook), after that request looked in the pool and
// before its connection joins the registry, which prunes at that add.

func TestH2RegistryPruneLeavesPool(t *testing.T) {
	stressLeakCheck(t, func(t *testing.T) {
		release := make(chan struct{})
		srv := startStressH2(t, release, func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path == "/fast" {
				io.WriteString(w, "ok")
				return
			}
			io.WriteString(w, "first")
			w.(http.Flusher).Flush()
			select {
			case <-r.Context().Done():
			case <-release:
			}
		}, nil)
		_, tr := stressH2Client(t, "ferry", &http.Transport{DisableKeepAlives: true})
		defer tr.CloseIdleConnections()

		type held struct {
			body   io.ReadCloser
			cancel context.CancelFunc
			read   chan error // the waiting Read's result
		}
		var bodies []held
		defer func() {
			for _, h := range bodies {
				h.cancel()
				h.body.Close()
			}
		}()
		liveLen := func() (n, pruneAt int) {
			tr.h2.live.mu.Lock()
			defer tr.h2.live.mu.Unlock()
			return len(tr.h2.live.m), tr.h2.live.pruneAt
		}
		// Hold single-use connections, each with a Read waiting on its
		// body, until the next connection's add prunes the registry.
		for {
			n, pruneAt := liveLen()
			if n > 0 && n+1 >= pruneAt {
				break
			}
			ctx, cancel := context.WithCancel(context.Background())
			req, _ := http.NewRequestWithContext(ctx, "GET", srv.URL+"/body", nil)
			resp, err := tr.RoundTrip(req)
			if err != nil {
				cancel()
				t.Fatal(err)
			}
			if resp.ProtoMajor != 2 {
				t.Fatalf("spoke %s, want HTTP/2", resp.Proto)
			}
			buf := make([]byte, 5)
			if _, err := io.ReadFull(resp.Body, buf); err != nil {
				t.Fatal(err)
			}
			h := held{body: resp.Body, cancel: cancel, read: make(chan error, 1)}
			go func() {
				_, err := resp.Body.Read(buf)
				h.read <- err
			}()
			bodies = append(bodies, h)
		}
		// Built with Go 1.26 (legacy x/net) every held connection is still
		// in the pool here, each refusing a stream as the next request
		// looked. Wrapped x/net (Go 1.27) grants the next request a stream
		// on a single-use connection in use and refuses it only in
		// RoundTrip, which drops that connection from the pool at once:
		// then only the newest one is pooled and the prune has nothing to
		// leave behind.
		pooled := tr.Stats().Conns.OpenH2
		t.Logf("before the dial: %d of %d held connections pooled", pooled, len(bodies))

		// The next request finds every held connection busy and dials;
		// inside that dial each held stream ends, half by Close racing
		// the waiting Read, half by cancelling the Read's context.
		var once sync.Once
		tr.h2.beforeFirstStream = func(sharedConn) {
			once.Do(func() {
				for i, h := range bodies {
					if i%2 == 0 {
						h.body.Close()
					} else {
						h.cancel()
					}
					<-h.read
				}
			})
		}
		if p := stressFinalGet(t, tr, srv.URL+"/fast"); p != "HTTP/2.0" {
			t.Fatalf("spoke %s, want HTTP/2", p)
		}
		tr.h2.beforeFirstStream = nil
		if n, _ := liveLen(); n != 1 {
			t.Fatalf("registry holds %d connections after the prune, want 1 (the new one)", n)
		}

		tr.CloseIdleConnections()
		if st := tr.Stats().Conns; st.OpenH2 != 0 {
			t.Errorf("after CloseIdleConnections: OpenH2 %d, want 0 (%d held connections were pooled before the dial and pruned from the registry by it)", st.OpenH2, pooled)
		}
	})
}
