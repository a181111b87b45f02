package transport

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httptrace"
	"sync"
	"testing"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/h2c"

	"github.com/ferryhttp/ferry/internal/selfsigned"
	"github.com/ferryhttp/ferry/internal/testpeer"
	"github.com/ferryhttp/ferry/server"
)

// One exercise of ferry's HTTP/2 client against each real server it meets
// in the field: nginx and Caddy over TLS (h2 by ALPN), ferry's own
// server.Wrap over TLS, and x/net's h2c server with prior knowledge.
// Each gets concurrent GETs on one connection, uploads larger than
// HTTP/2's initial window (known and unknown length) echoed byte for byte,
// trailers where the server can send them, and ferry's Stats must count
// every response as HTTP/2. The binaries' tests skip locally when the
// binary is absent and fail under CI=true (testpeer.Binary).

// h2InteropPeer is what one server offers the exercise.
type h2InteropPeer struct {
	base  string // scheme://host:port
	hello string // the body of GET /hello
	// trailers: GET /trailers answers with the trailer
	// X-Interop-Trailer: yes after its body.
	trailers bool
}

// h2InteropUpload is larger than the initial stream and connection
// windows (65,535 bytes), so the upload needs the server's WINDOW_UPDATEs.
const h2InteropUpload = 1 << 20

// h2InteropConcurrent is the number of GETs in flight at once.
const h2InteropConcurrent = 16

// h2InteropHandler answers GET /hello with "hello from name\n", POST
// /echo with the request's body, and GET /trailers with a body and the
// trailer X-Interop-Trailer: yes.
func h2InteropHandler(name string) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /hello", func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "hello from "+name+"\n")
	})
	mux.HandleFunc("POST /echo", func(w http.ResponseWriter, r *http.Request) {
		// Read whole before answering: an HTTP/1.1 server (behind a
		// proxy) may stop reading the body once the response started.
		b, err := io.ReadAll(r.Body)
		if err != nil {
			w.WriteHeader(http.StatusBadRequest)
			return
		}
		w.Write(b)
	})
	mux.HandleFunc("GET /trailers", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Trailer", "X-Interop-Trailer")
		io.WriteString(w, "trailers from "+name+"\n")
		w.Header().Set("X-Interop-Trailer", "yes")
	})
	return mux
}

// startH2InteropBackend serves h2InteropHandler("backend") over cleartext
// HTTP/1.1 for a proxy in front of it; it returns "host:port".
func startH2InteropBackend(t *testing.T) string {
	hs := httptest.NewUnstartedServer(h2InteropHandler("backend"))
	hs.Config.ErrorLog = nilLogger()
	hs.Start()
	t.Cleanup(hs.Close)
	return hs.Listener.Addr().String()
}

// h2InteropExercise runs the exercise on tr (fresh, used for nothing
// else) against p.
func h2InteropExercise(t *testing.T, tr *Transport, p h2InteropPeer) {
	var mu sync.Mutex // guards conns
	conns := map[net.Conn]bool{}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	ctx = httptrace.WithClientTrace(ctx, &httptrace.ClientTrace{
		GotConn: func(i httptrace.GotConnInfo) {
			mu.Lock()
			conns[i.Conn] = true
			mu.Unlock()
		},
	})
	requests := 0
	do := func(method, path string, body io.Reader) (*http.Response, []byte, error) {
		req, err := http.NewRequestWithContext(ctx, method, p.base+path, body)
		if err != nil {
			return nil, nil, err
		}
		resp, err := tr.RoundTrip(req)
		if err != nil {
			return nil, nil, err
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		if err != nil {
			return resp, b, err
		}
		if resp.StatusCode != 200 || resp.Proto != "HTTP/2.0" || resp.ProtoMajor != 2 {
			return resp, b, fmt.Errorf("%s %s: status %d proto %s", method, path, resp.StatusCode, resp.Proto)
		}
		if want := p.base[:5] == "https"; want && (resp.TLS == nil || resp.TLS.NegotiatedProtocol != "h2") {
			return resp, b, fmt.Errorf("%s %s: TLS %+v, want h2 negotiated by ALPN", method, path, resp.TLS)
		}
		return resp, b, nil
	}
	get := func() error {
		_, b, err := do("GET", "/hello", nil)
		if err == nil && string(b) != p.hello {
			err = fmt.Errorf("GET /hello: body %q, want %q", b, p.hello)
		}
		return err
	}

	// One request opens the connection; the concurrent ones share it.
	if err := get(); err != nil {
		t.Fatal(err)
	}
	requests++
	errs := make(chan error, h2InteropConcurrent)
	for i := 0; i < h2InteropConcurrent; i++ {
		go func() { errs <- get() }()
	}
	for i := 0; i < h2InteropConcurrent; i++ {
		if err := <-errs; err != nil {
			t.Error(err)
		}
	}
	requests += h2InteropConcurrent

	payload := make([]byte, h2InteropUpload)
	rand.NewChaCha8([32]byte{'h', '2'}).Read(payload)
	for _, up := range []struct {
		name string
		body io.Reader
	}{
		{"known length", bytes.NewReader(payload)},
		{"unknown length", &streamBody{bytes.NewReader(payload)}},
	} {
		_, b, err := do("POST", "/echo", up.body)
		requests++
		if err != nil {
			t.Errorf("upload of %s: %v", up.name, err)
		} else if !bytes.Equal(b, payload) {
			t.Errorf("upload of %s: echo of %d bytes differs from the %d sent", up.name, len(b), len(payload))
		}
	}

	if p.trailers {
		resp, _, err := do("GET", "/trailers", nil)
		requests++
		if err != nil {
			t.Error(err)
		} else if got := resp.Trailer.Get("X-Interop-Trailer"); got != "yes" {
			t.Errorf("trailer X-Interop-Trailer = %q, want \"yes\" (Trailer %v)", got, resp.Trailer)
		}
	}

	mu.Lock()
	n := len(conns)
	mu.Unlock()
	if n != 1 {
		t.Errorf("%d requests used %d connections, want 1", requests, n)
	}
	st := tr.Stats()
	if countStats && (st.Requests.H2 != uint64(requests) || st.Requests.Total() != uint64(requests)) {
		t.Errorf("Stats: %+v, want all %d responses over HTTP/2", st.Requests, requests)
	}
	if st.Conns.OpenH2 != 1 {
		t.Errorf("Stats: %d open HTTP/2 connections, want 1", st.Conns.OpenH2)
	}
}

// h2InteropTLSClient is ferry's Transport for a TLS server with cert,
// HTTP/3 off (no server here offers it).
func h2InteropTLSClient(cert *selfsigned.Cert) *Transport {
	tr := From(h2BaseClient(cert))
	tr.DisableHTTP3 = true
	return tr
}

func TestH2InteropCaddy(t *testing.T) {
	bin := testpeer.Binary(t, "caddy", "caddy")
	cert, err := selfsigned.New("127.0.0.1")
	if err != nil {
		t.Fatal(err)
	}
	backend := startH2InteropBackend(t)
	// Caddy answers /hello itself and proxies the rest (its reverse proxy
	// passes the backend's trailers on).
	base := startCaddySite(t, bin, cert, "h1 h2", fmt.Sprintf(`respond /hello "hello from caddy" 200
	reverse_proxy /echo %[1]s
	reverse_proxy /trailers %[1]s`, backend))
	tr := h2InteropTLSClient(cert)
	defer tr.CloseIdleConnections()
	h2InteropExercise(t, tr, h2InteropPeer{base: base, hello: "hello from caddy", trailers: true})
}

// TestH2InteropFerryServer: ferry's own server (server.Wrap) over TLS,
// HTTP/3 off.
func TestH2InteropFerryServer(t *testing.T) {
	cert, err := selfsigned.New("127.0.0.1")
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := server.Wrap(&http.Server{Handler: h2InteropHandler("ferry"), TLSConfig: cert.ServerConfig(), ErrorLog: nilLogger()})
	srv.DisableHTTP3 = true
	served := make(chan error, 1)
	go func() { served <- srv.ServeTLS(ln, nil, "", "") }()
	defer func() {
		srv.Close()
		if err := <-served; err != nil && err != http.ErrServerClosed {
			t.Errorf("ServeTLS: %v", err)
		}
	}()
	tr := h2InteropTLSClient(cert)
	defer tr.CloseIdleConnections()
	h2InteropExercise(t, tr, h2InteropPeer{base: "https://" + ln.Addr().String(), hello: "hello from ferry\n", trailers: true})
}

// TestH2InteropH2CPriorKnowledge: cleartext HTTP/2 with prior knowledge
// against x/net's h2c handler (deprecated for new servers, but its
// http2.Server is an implementation apart from net/http's bundled one).
func TestH2InteropH2CPriorKnowledge(t *testing.T) {
	hs := httptest.NewUnstartedServer(h2c.NewHandler(h2InteropHandler("h2c"), &http2.Server{}))
	hs.Config.ErrorLog = nilLogger()
	hs.Start()
	defer hs.Close()
	tr := From(&http.Transport{Protocols: protocolsOf("h2c")})
	defer tr.CloseIdleConnections()
	h2InteropExercise(t, tr, h2InteropPeer{base: hs.URL, hello: "hello from h2c\n", trailers: true})
}
