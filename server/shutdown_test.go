package server

import (
	"context"
	"crypto/tls"
	"errors"
	"io"
	"net"
	"net/http"
	"testing"
	"time"

	"github.com/quic-go/quic-go"
	"github.com/quic-go/quic-go/http3"
)

// blockingHandler signals entered for each request, then waits for release
// (answering 200 "done") or for the request context to end.
type blockingHandler struct {
	entered chan struct{}
	release chan struct{}
}

func newBlockingHandler() *blockingHandler {
	return &blockingHandler{entered: make(chan struct{}, 16), release: make(chan struct{})}
}

func (h *blockingHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h.entered <- struct{}{}
	select {
	case <-h.release:
		io.WriteString(w, "done")
	case <-r.Context().Done():
	}
}

type result struct {
	status int
	body   string
	err    error
}

// fetch runs GET url in the background and delivers its outcome.
func fetch(c *http.Client, url string) <-chan result {
	ch := make(chan result, 1)
	go func() {
		resp, err := c.Get(url)
		if err != nil {
			ch <- result{err: err}
			return
		}
		b, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		ch <- result{status: resp.StatusCode, body: string(b), err: err}
	}()
	return ch
}

func TestShutdownWaitsForInFlight(t *testing.T) {
	for _, p := range allProtocols {
		t.Run(string(p), func(t *testing.T) {
			h := newBlockingHandler()
			st := startTLS(t, &http.Server{Handler: h}, nil)
			client := newClient(t, p)
			inFlight := fetch(client, st.url("/"))
			<-h.entered

			shutdownDone := make(chan error, 1)
			go func() { shutdownDone <- st.srv.Shutdown(context.Background()) }()

			// Serve returns once every accept loop has stopped: from then on
			// the listeners are closed.
			if err := st.waitServe(); !errors.Is(err, http.ErrServerClosed) {
				t.Fatalf("Serve: %v, want ErrServerClosed", err)
			}
			assertRefused(t, p, st.port)
			if st.srv.AltSvc() != "" {
				t.Errorf("still advertising %q during shutdown", st.srv.AltSvc())
			}

			select {
			case err := <-shutdownDone:
				t.Fatalf("Shutdown returned (%v) while a request was in flight", err)
			default:
			}
			close(h.release)
			r := <-inFlight
			if r.err != nil || r.status != 200 || r.body != "done" {
				t.Fatalf("in-flight request: status %d body %q err %v; want 200 \"done\"", r.status, r.body, r.err)
			}
			if err := <-shutdownDone; err != nil {
				t.Fatalf("Shutdown: %v", err)
			}
		})
	}
}

// assertRefused checks that a new connection of kind p to port fails.
func assertRefused(t *testing.T, p protocol, port string) {
	t.Helper()
	addr := net.JoinHostPort("127.0.0.1", port)
	if p != h3 {
		if c, err := net.Dial("tcp", addr); err == nil {
			c.Close()
			t.Fatalf("new TCP connection accepted after Shutdown began")
		}
		return
	}
	tr := &http3.Transport{
		TLSClientConfig: &tls.Config{RootCAs: testCert.Pool},
		QUICConfig:      &quic.Config{HandshakeIdleTimeout: 300 * time.Millisecond},
	}
	defer tr.Close()
	req, _ := http.NewRequest("GET", "https://"+addr+"/", nil)
	if resp, err := tr.RoundTrip(req); err == nil {
		resp.Body.Close()
		t.Fatalf("new QUIC connection accepted after Shutdown began")
	}
}

func TestCloseEndsInFlight(t *testing.T) {
	for _, p := range allProtocols {
		t.Run(string(p), func(t *testing.T) {
			h := newBlockingHandler()
			defer close(h.release)
			st := startTLS(t, &http.Server{Handler: h}, nil)
			inFlight := fetch(newClient(t, p), st.url("/"))
			<-h.entered
			if err := st.srv.Close(); err != nil {
				t.Fatalf("Close: %v", err)
			}
			if r := <-inFlight; r.err == nil && r.status == 200 && r.body == "done" {
				t.Fatal("in-flight request completed normally after Close")
			}
		})
	}
}

func TestShutdownContextExpires(t *testing.T) {
	h := newBlockingHandler()
	defer close(h.release)
	st := startTLS(t, &http.Server{Handler: h}, nil)
	inFlight := fetch(newClient(t, h2), st.url("/"))
	<-h.entered
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := st.srv.Shutdown(ctx); !errors.Is(err, context.Canceled) {
		t.Fatalf("Shutdown with a cancelled context: %v, want context.Canceled", err)
	}
	st.srv.Close()
	if r := <-inFlight; r.err == nil && r.body == "done" {
		t.Fatal("request completed although the server was closed")
	}
}

func TestRegisterOnShutdown(t *testing.T) {
	st := startTLS(t, &http.Server{Handler: echoProto}, nil)
	ran := make(chan struct{})
	st.srv.RegisterOnShutdown(func() { close(ran) })
	if err := st.srv.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	<-ran
}
