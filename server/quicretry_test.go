package server

import (
	"context"
	"crypto/tls"
	"encoding/binary"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	"github.com/quic-go/quic-go"
	"github.com/quic-go/quic-go/http3"
)

// garbageInitial returns a 1200-byte datagram with a valid QUIC v1 Initial
// long header, fresh random connection IDs and an undecryptable payload:
// enough for quic-go's server to create a connection for it (when it does
// not answer with a Retry), which then waits for the handshake timeout.
func garbageInitial(rnd *rand.ChaCha8) []byte {
	b := make([]byte, 1200)
	rnd.Read(b)
	b[0] = 0xc3                           // long header, fixed bit, Initial, 4-byte packet number
	binary.BigEndian.PutUint32(b[1:5], 1) // QUIC version 1
	b[5] = 8                              // destination connection ID length (b[6:14] random)
	b[14] = 8                             // source connection ID length (b[15:23] random)
	b[23] = 0                             // no token
	n := len(b) - 26                      // Length: packet number and payload, to the end
	b[24], b[25] = 0x40|byte(n>>8), byte(n)
	return b
}

// sendInitialFlood sends n garbage Initials to addr from one loopback UDP
// socket, in small bursts so that the server's socket buffer keeps up, and
// returns the socket (closed by the test's cleanup) so that any Retry the
// server answers with has somewhere to go.
func sendInitialFlood(t *testing.T, addr net.Addr, n int) {
	t.Helper()
	c, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	rnd := rand.NewChaCha8([32]byte{1})
	const burst = 10
	for i := 0; i < n; i++ {
		if _, err := c.WriteTo(garbageInitial(rnd), addr); err != nil {
			t.Fatalf("flood packet %d: %v", i, err)
		}
		if i%burst == burst-1 {
			time.Sleep(2 * time.Millisecond)
		}
	}
}

// retrySpotter is a client PacketConn that counts the QUIC Retry packets it
// receives (long header, type 3 in QUIC v1).
type retrySpotter struct {
	net.PacketConn
	retries atomic.Int32
}

func (c *retrySpotter) ReadFrom(p []byte) (int, net.Addr, error) {
	n, addr, err := c.PacketConn.ReadFrom(p)
	if n > 0 && p[0]&0x80 != 0 && (p[0]>>4)&3 == 3 {
		c.retries.Add(1)
	}
	return n, addr, err
}

// getWatchingRetry makes one HTTP/3 request to st over a fresh QUIC
// transport, checks it is answered, and reports whether the server asked
// for a Retry on the way.
func getWatchingRetry(t *testing.T, st *started) (retried bool) {
	t.Helper()
	quietWrappedSocket(t)
	retried, err := tryWatchingRetry(st)
	if err != nil {
		t.Fatalf("legitimate client: %v", err)
	}
	return retried
}

// tryWatchingRetry is getWatchingRetry returning the request's failure.
func tryWatchingRetry(st *started) (retried bool, err error) {
	udp, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		return false, err
	}
	spot := &retrySpotter{PacketConn: udp}
	qt := &quic.Transport{Conn: spot}
	defer qt.Close()
	tr := &http3.Transport{
		TLSClientConfig: &tls.Config{RootCAs: testCert.Pool},
		Dial: func(ctx context.Context, addr string, tlsConf *tls.Config, conf *quic.Config) (*quic.Conn, error) {
			ua, err := net.ResolveUDPAddr("udp", addr)
			if err != nil {
				return nil, err
			}
			return qt.DialEarly(ctx, ua, tlsConf, conf)
		},
	}
	defer tr.Close()
	c := &http.Client{Transport: tr, Timeout: 20 * time.Second}
	resp, err := c.Get(st.url("/"))
	if err != nil {
		return spot.retries.Load() > 0, err
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err == nil && (resp.StatusCode != http.StatusOK || string(body) != string(h3)) {
		err = fmt.Errorf("status %d, body %q", resp.StatusCode, body)
	}
	return spot.retries.Load() > 0, err
}

// quietWrappedSocket stops quic-go from logging that it cannot size the
// receive buffer of retrySpotter, which hides the *net.UDPConn.
func quietWrappedSocket(t *testing.T) {
	t.Setenv("QUIC_GO_DISABLE_RECEIVE_BUFFER_WARNING", "true")
}

// halfOpenHandshakes reads the server's gauge; -1 when it counts nothing.
func halfOpenHandshakes(s *Server) int64 {
	s.mu.Lock()
	g := s.handshakes
	s.mu.Unlock()
	if g == nil {
		return -1
	}
	return g.n.Load()
}

// TestQUICRetryPolicy checks, on a quiet server, who gets a Retry: nobody
// under the default threshold or with QUICRetryNever, everybody with
// QUICRetryAlways; the half-open count is back to zero once the handshake
// is done.
func TestQUICRetryPolicy(t *testing.T) {
	rows := []struct {
		name      string
		threshold int
		wantRetry bool
	}{
		{"default", 0, false},
		{"always", QUICRetryAlways, true},
		{"never", QUICRetryNever, false},
		{"threshold one", 1, false},
	}
	for _, row := range rows {
		t.Run(row.name, func(t *testing.T) {
			st := startTLS(t, &http.Server{Handler: echoProto}, func(s *Server) { s.QUICRetryThreshold = row.threshold })
			if got := getWatchingRetry(t, st); got != row.wantRetry {
				t.Errorf("Retry sent: %v, want %v", got, row.wantRetry)
			}
			if n := halfOpenHandshakes(st.srv); n > 0 {
				t.Errorf("%d handshakes still counted as half-open after the request", n)
			}
		})
	}
}

func TestQUICRetryThresholdInvalid(t *testing.T) {
	srv := Wrap(&http.Server{Addr: "127.0.0.1:0", TLSConfig: &tls.Config{Certificates: []tls.Certificate{testCert.TLS}}})
	srv.QUICRetryThreshold = -3
	err := srv.ListenTLS("", "")
	if err == nil {
		srv.Close()
		t.Fatal("ListenTLS accepted QUICRetryThreshold -3")
	}
}

// floodFigures is what one Initial flood cost the server.
type floodFigures struct {
	goroutines int    // peak goroutines above the baseline
	heap       uint64 // heap in use above the baseline, right after the flood
	retried    bool   // the legitimate client was sent a Retry
	err        error  // the legitimate request's failure
}

// measureInitialFlood serves HTTP/3 with the given QUICRetryThreshold,
// floods it with n garbage Initials from one loopback socket, and while the
// flood's connections are still alive
// measures goroutines and heap and makes a legitimate request.
func measureInitialFlood(t *testing.T, threshold, n int) floodFigures {
	// Long enough that no flood connection times out before the
	// legitimate request, even under the race detector; Close ends them.
	const handshakeTimeout = 30 * time.Second
	st := startTLS(t, &http.Server{Handler: echoProto}, func(s *Server) {
		s.QUICRetryThreshold = threshold
		s.QUICConfig = &quic.Config{HandshakeIdleTimeout: handshakeTimeout}
	})
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	baseHeap, baseG := ms.HeapInuse, runtime.NumGoroutine()

	start := time.Now()
	sendInitialFlood(t, st.srv.PacketAddr(), n)
	// Let the server drain its socket: the peak is reached when the
	// goroutine count stops growing.
	peak := runtime.NumGoroutine()
	for prev := -1; peak != prev && time.Since(start) < 5*time.Second; {
		time.Sleep(50 * time.Millisecond)
		prev, peak = peak, max(peak, runtime.NumGoroutine())
	}
	runtime.ReadMemStats(&ms)
	f := floodFigures{goroutines: peak - baseG}
	if ms.HeapInuse > baseHeap {
		f.heap = ms.HeapInuse - baseHeap
	}
	if time.Since(start) > handshakeTimeout*2/3 {
		t.Fatalf("flood took %v: the flood's connections may have timed out before the legitimate request", time.Since(start))
	}
	quietWrappedSocket(t)
	f.retried, f.err = tryWatchingRetry(st)
	t.Logf("%v after the flood began: threshold %d, %d Initials: +%d goroutines, +%d KiB heap in use, half-open %d; legitimate client: retried %v, error %v",
		time.Since(start).Round(time.Millisecond), threshold, n, f.goroutines, f.heap>>10, halfOpenHandshakes(st.srv), f.retried, f.err)
	return f
}

// TestQUICRetryBoundsInitialFlood floods the HTTP/3 port with Initial
// packets that quic-go accepts far enough to create a connection. With the
// default threshold, the server holds at most about that many half-open
// handshakes, so goroutines and heap stay small, and a legitimate client
// still connects, through a Retry. With QUICRetryNever (quic-go's default
// behaviour) the same flood creates a connection per packet: the control.
func TestQUICRetryBoundsInitialFlood(t *testing.T) {
	const initials = 2000
	defended := measureInitialFlood(t, 0, initials)
	open := measureInitialFlood(t, QUICRetryNever, initials)

	const goroutineBound, heapBound = 800, 16 << 20
	if defended.goroutines > goroutineBound {
		t.Errorf("default threshold: flood added %d goroutines, want at most %d", defended.goroutines, goroutineBound)
	}
	if defended.heap > heapBound {
		t.Errorf("default threshold: flood added %d MiB of heap, want at most %d", defended.heap>>20, heapBound>>20)
	}
	if defended.err != nil {
		t.Errorf("default threshold: legitimate request during the flood failed: %v", defended.err)
	}
	if !defended.retried {
		t.Error("default threshold: the legitimate client was not sent a Retry during the flood")
	}
	// The control shows the flood is one that costs: without Retry it
	// must cost many times the defended figures. Its legitimate request
	// may fail (the server may not keep up, notably under the race
	// detector); only its cost is asserted.
	if open.goroutines < max(4*defended.goroutines, 1500) {
		t.Errorf("control (QUICRetryNever): flood added only %d goroutines; the flood does not reach quic-go", open.goroutines)
	}
	if open.heap < 4*max(defended.heap, 1<<20) {
		t.Errorf("control (QUICRetryNever): flood added only %d KiB of heap, defended %d KiB", open.heap>>10, defended.heap>>10)
	}
	if open.retried {
		t.Error("control (QUICRetryNever): the legitimate client was sent a Retry")
	}
}

// TestQUICRetryHalfOpenCountDrains checks the other way out of the count:
// handshakes that never complete leave it when they time out, so after a
// flood the server stops asking legitimate clients for a Retry.
func TestQUICRetryHalfOpenCountDrains(t *testing.T) {
	st := startTLS(t, &http.Server{Handler: echoProto}, func(s *Server) {
		s.QUICConfig = &quic.Config{HandshakeIdleTimeout: 500 * time.Millisecond}
	})
	sendInitialFlood(t, st.srv.PacketAddr(), 200)
	deadline := time.Now().Add(10 * time.Second)
	for halfOpenHandshakes(st.srv) < DefaultQUICRetryThreshold {
		if time.Now().After(deadline) {
			t.Fatalf("half-open count %d after 200 abandoned Initials, want %d", halfOpenHandshakes(st.srv), DefaultQUICRetryThreshold)
		}
		time.Sleep(10 * time.Millisecond)
	}
	for halfOpenHandshakes(st.srv) != 0 {
		if time.Now().After(deadline) {
			t.Fatalf("half-open count still %d long after the handshake timeout", halfOpenHandshakes(st.srv))
		}
		time.Sleep(10 * time.Millisecond)
	}
	if getWatchingRetry(t, st) {
		t.Error("a client was sent a Retry after the flood's handshakes timed out")
	}
}
