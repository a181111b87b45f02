package server

import (
	"bytes"
	"context"
	"crypto/tls"
	"io"
	"net"
	"net/http"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/quic-go/quic-go"
	"github.com/quic-go/quic-go/http3"
	"github.com/quic-go/quic-go/quicvarint"
)

// dialRawH3 opens a QUIC connection speaking h3 to st, without any HTTP/3
// layer: the test writes the request streams byte by byte.
func dialRawH3(t *testing.T, st *started) *quic.Conn {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	conn, err := quic.DialAddr(ctx, st.srv.PacketAddr().String(),
		&tls.Config{RootCAs: testCert.Pool, NextProtos: []string{http3.NextProtoH3}},
		&quic.Config{KeepAlivePeriod: 200 * time.Millisecond}) // a live peer: only the header is late
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.CloseWithError(0, "") })
	return conn
}

// headersFramePrefix is the start of a HEADERS frame declaring a field
// section of length bytes.
func headersFramePrefix(length int) []byte {
	b := quicvarint.Append(nil, 0x1) // HEADERS
	return quicvarint.Append(b, uint64(length))
}

// getFieldSection is a QPACK field section (static table only) for
// GET https://authority/.
func getFieldSection(authority string) []byte {
	b := []byte{0x00, 0x00} // required insert count 0, base 0
	b = append(b, 0xc0|17)  // :method GET
	b = append(b, 0xc0|23)  // :scheme https
	b = append(b, 0xc0|1)   // :path /
	b = append(b, 0x50|0)   // :authority, literal value
	b = append(b, byte(len(authority)))
	return append(b, authority...)
}

// waitStreamEnd reads str until it fails and returns when it did; a
// stream the server answers with data (EOF) counts as served, not ended.
func waitStreamEnd(str *quic.Stream) (served bool) {
	_, err := io.Copy(io.Discard, str)
	return err == nil
}

// TestHTTP3ReadHeaderTimeoutEndsSlowHeaders opens request streams whose
// header never completes on four connections: streams declaring a large
// HEADERS frame and sending part of it, and streams that send nothing
// (opened implicitly by the next one). With ReadHeaderTimeout 1 s every one
// of them must end within a few seconds, the memory their partial headers
// held must be bounded and released, and a normal request must still be
// served, during and after.
func TestHTTP3ReadHeaderTimeoutEndsSlowHeaders(t *testing.T) {
	const (
		readHeaderTimeout = time.Second
		maxHeaderBytes    = 64 << 10
		conns             = 4
		streamsPerConn    = 60 // within quic-go's 100 concurrent streams
		partialBytes      = 48 << 10
	)
	hs := &http.Server{Handler: echoProto, ReadHeaderTimeout: readHeaderTimeout, MaxHeaderBytes: maxHeaderBytes}
	st := startTLS(t, hs, nil)

	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	baseHeap := ms.HeapInuse

	start := time.Now()
	var wg sync.WaitGroup
	ended := make(chan time.Duration, conns*streamsPerConn)
	partial := append(headersFramePrefix(maxHeaderBytes), bytes.Repeat([]byte{0x50}, partialBytes)...)
	for c := 0; c < conns; c++ {
		conn := dialRawH3(t, st)
		for i := 0; i < streamsPerConn; i++ {
			str, err := conn.OpenStream()
			if err != nil {
				t.Fatal(err)
			}
			if i%2 == 1 || i == streamsPerConn-1 { // even streams stay silent, opened by the next
				if _, err := str.Write(partial); err != nil {
					t.Fatal(err)
				}
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				if waitStreamEnd(str) {
					t.Errorf("stream %d served a response to an incomplete header", str.StreamID())
				}
				ended <- time.Since(start)
			}()
		}
	}

	// While the headers are pending, the server holds at most the
	// partial blocks (each under MaxHeaderBytes) and their buffers.
	time.Sleep(readHeaderTimeout / 2)
	runtime.ReadMemStats(&ms)
	held := int64(ms.HeapInuse) - int64(baseHeap)
	const heapBound = conns * streamsPerConn * 4 * maxHeaderBytes
	if held > heapBound {
		t.Errorf("partial headers hold %d MiB of heap, want at most %d MiB", held>>20, heapBound>>20)
	}
	resp, body := get(t, newClient(t, h3), st.url("/"))
	if resp.StatusCode != http.StatusOK || body != string(h3) {
		t.Errorf("normal request during the slow headers: status %d, body %q", resp.StatusCode, body)
	}

	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(readHeaderTimeout + 10*time.Second):
		t.Fatalf("%d of %d streams with an incomplete header still open %v after they began (ReadHeaderTimeout %v)",
			conns*streamsPerConn-len(ended), conns*streamsPerConn, time.Since(start).Round(time.Millisecond), readHeaderTimeout)
	}
	close(ended)
	var last time.Duration
	for d := range ended {
		last = max(last, d)
	}
	runtime.GC()
	runtime.ReadMemStats(&ms)
	after := int64(ms.HeapInuse) - int64(baseHeap)
	t.Logf("%d streams ended, the last %v after they began; heap in use +%d KiB while pending, +%d KiB after",
		conns*streamsPerConn, last.Round(time.Millisecond), held>>10, after>>10)
	if after > 16<<20 {
		t.Errorf("heap still %d MiB above the baseline after the slow streams ended", after>>20)
	}
	resp, body = get(t, newClient(t, h3), st.url("/"))
	if resp.StatusCode != http.StatusOK || body != string(h3) {
		t.Errorf("normal request after the slow headers: status %d, body %q", resp.StatusCode, body)
	}
}

// TestHTTP3OversizedHeaderRefusedAtOnce checks the memory side: a HEADERS
// frame declaring more than the limit derived from MaxHeaderBytes is
// refused as soon as its length is read (431 or a reset), long before any
// timeout, without waiting for the declared bytes.
func TestHTTP3OversizedHeaderRefusedAtOnce(t *testing.T) {
	const maxHeaderBytes = 8 << 10
	st := startTLS(t, &http.Server{Handler: echoProto, ReadHeaderTimeout: time.Minute, MaxHeaderBytes: maxHeaderBytes}, nil)
	conn := dialRawH3(t, st)
	str, err := conn.OpenStream()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := str.Write(append(headersFramePrefix(h3MaxHeaderBytes(maxHeaderBytes)+1), 0, 0)); err != nil {
		t.Fatal(err)
	}
	done := make(chan []byte, 1)
	go func() {
		b, _ := io.ReadAll(str)
		done <- b
	}()
	select {
	case b := <-done:
		if bytes.Contains(b, []byte(h3)) {
			t.Fatalf("oversized header served: %q", b)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("a HEADERS frame declaring more than the limit was not refused")
	}
}

// TestHTTP3ReadHeaderTimeoutSparesTimelyHeaders sends a request header in
// two halves well within ReadHeaderTimeout, on a connection that keeps
// being used for longer than the timeout: it must be served, and the
// connection must survive the timeout.
func TestHTTP3ReadHeaderTimeoutSparesTimelyHeaders(t *testing.T) {
	const readHeaderTimeout = time.Second
	st := startTLS(t, &http.Server{Handler: echoProto, ReadHeaderTimeout: readHeaderTimeout}, nil)
	conn := dialRawH3(t, st)
	fields := getFieldSection("127.0.0.1:" + st.port)
	frame := append(headersFramePrefix(len(fields)), fields...)
	for round := 0; round < 3; round++ {
		str, err := conn.OpenStream()
		if err != nil {
			t.Fatal(err)
		}
		half := len(frame) / 2
		if _, err := str.Write(frame[:half]); err != nil {
			t.Fatal(err)
		}
		time.Sleep(readHeaderTimeout * 6 / 10)
		if _, err := str.Write(frame[half:]); err != nil {
			t.Fatal(err)
		}
		str.Close()
		resp, err := io.ReadAll(str)
		if err != nil {
			t.Fatalf("request %d: %v", round, err)
		}
		if !bytes.Contains(resp, []byte(h3)) {
			t.Fatalf("request %d: response %q lacks the body %q", round, resp, h3)
		}
	}
	if err := conn.Context().Err(); err != nil {
		t.Fatalf("connection closed: %v", context.Cause(conn.Context()))
	}
}

// TestHTTP1ReadHeaderTimeoutClosesSilentConn is the TCP control: the same
// server's HTTP/1.1 side closes a connection that sends no request header
// within ReadHeaderTimeout, as net/http does.
func TestHTTP1ReadHeaderTimeoutClosesSilentConn(t *testing.T) {
	const readHeaderTimeout = time.Second
	st := startTLS(t, &http.Server{Handler: echoProto, ReadHeaderTimeout: readHeaderTimeout}, nil)
	c, err := tls.Dial("tcp", st.srv.Addr().String(), &tls.Config{RootCAs: testCert.Pool, NextProtos: []string{"http/1.1"}})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	start := time.Now()
	c.SetReadDeadline(time.Now().Add(readHeaderTimeout + 10*time.Second))
	_, err = c.Read(make([]byte, 1))
	if ne, ok := err.(net.Error); ok && ne.Timeout() {
		t.Fatalf("silent HTTP/1.1 connection still open %v after connecting", time.Since(start))
	}
	if err == nil {
		t.Fatal("the server sent data to a silent HTTP/1.1 connection")
	}
	t.Logf("silent HTTP/1.1 connection closed after %v", time.Since(start).Round(time.Millisecond))
}
