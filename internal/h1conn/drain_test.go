package h1conn

import (
	"bufio"
	"bytes"
	"go/version"
	"io"
	"net"
	"net/http"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/ferryhttp/ferry/internal/testpeer"
)

// toolchainDrains: the Go release running the tests drains early-closed
// bodies (1.27 and later).
var toolchainDrains = version.Compare(version.Lang(runtime.Version()), "go1.27") >= 0

func wantKept(keepsOn127 bool) bool { return toolchainDrains && keepsOn127 }

// waitSettled waits until pc was handed back (true) or closed (false), by
// Close or by the drain it started.
func waitSettled(t *testing.T, pc *testConn) bool {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); {
		if pc.takeIdle() {
			return true
		}
		pc.mu.Lock()
		closed := pc.closes > 0
		pc.mu.Unlock()
		if closed {
			return false
		}
		time.Sleep(time.Millisecond)
	}
	t.Fatal("connection neither handed back nor closed within 10s")
	return false
}

func TestDrainOnEarlyCloseFollowsToolchain(t *testing.T) {
	if drainOnEarlyClose != toolchainDrains {
		t.Fatalf("drainOnEarlyClose = %v built by %s", drainOnEarlyClose, runtime.Version())
	}
}

// TestDrainByteBudget checks the drain's byte budget on bodies read
// from memory: the end must come within 256 KiB of what is left, counted as
// net/http counts (it copies at most 256 KiB + 1 bytes and keeps the
// connection only when the copy stopped short at EOF).
func TestDrainByteBudget(t *testing.T) {
	chunkedBody := func(n int) string {
		resp := testpeer.ChunkedResponse(n, 16<<10, true)
		return resp[strings.Index(resp, "\r\n\r\n")+4:]
	}
	for _, tc := range []struct {
		name   string
		kind   bodyKind
		length int64
		wire   string
		ended  bool
	}{
		{"length-256k", bodyLength, 256 << 10, strings.Repeat("x", 256<<10), true},
		// Only a transparently decompressed body may be drained with a
		// Content-Length over 256 KiB; its end then comes with byte 256 KiB + 1.
		{"length-256k-plus-1", bodyLength, 256<<10 + 1, strings.Repeat("x", 256<<10+1), false},
		{"length-cut-short", bodyLength, 1000, strings.Repeat("x", 999), false},
		{"chunked-256k", bodyChunked, -1, chunkedBody(256 << 10), true},
		{"chunked-256k-plus-1", bodyChunked, -1, chunkedBody(256<<10 + 1), false},
		{"chunked-empty", bodyChunked, -1, chunkedBody(0), true},
		{"chunked-malformed", bodyChunked, -1, "5\r\nabcdeXX", false},
		{"chunked-no-end", bodyChunked, -1, "5\r\nabcde\r\n", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pc := &Conn{cfg: testConfig(), br: bufio.NewReader(strings.NewReader(tc.wire))}
			trailer := http.Header{"X-T": nil}
			var b Body
			b.init(pc, tc.kind, tc.length, &trailer)
			b.dropTrailer = true
			buf := make([]byte, 32<<10)
			if got := b.discardRest(buf); got != tc.ended {
				t.Errorf("discardRest = %v, want %v", got, tc.ended)
			}
			if len(trailer) != 1 || trailer["X-T"] != nil {
				t.Errorf("trailer stored while draining: %v", trailer)
			}
		})
	}
}

// TestEarlyCloseBufferedRest closes a body whose rest is already in the
// read buffer (over an in-memory pipe, so what is buffered is exactly
// known): Close discards it at once when it is within the limit, and leaves
// a rest over the limit (possible for a decompressed body with a large
// ReadBufferSize) to the drain, which gives up on it, as net/http would.
func TestEarlyCloseBufferedRest(t *testing.T) {
	for _, tc := range []struct {
		name  string
		rest  int
		keeps bool // on Go 1.27
	}{
		{"256k", 256 << 10, true},
		{"256k-plus-1", 256<<10 + 1, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := testConfig()
			cfg.ReadBufferSize, cfg.DrainTime = 1<<20, time.Minute
			client, server := net.Pipe()
			defer server.Close()
			pc := newTestConn(cfg, client)
			defer pc.Close()
			go server.Write(bytes.Repeat([]byte("x"), tc.rest))
			if _, err := pc.br.Peek(tc.rest); err != nil {
				t.Fatal(err)
			}
			trailer := http.Header(nil)
			var b Body
			b.init(&pc.Conn, bodyLength, int64(tc.rest), &trailer)
			b.bigLength = false // as for a transparently decompressed body
			b.Close()
			want := wantKept(tc.keeps)
			if kept := waitSettled(t, pc); kept != want {
				t.Fatalf("connection kept after Close = %v, want %v", kept, want)
			}
			if !want { // the connection is closed, by Close or by the drain
				if _, err := server.Read(make([]byte, 1)); err != io.EOF {
					t.Fatalf("server end: %v, want EOF", err)
				}
			}
		})
	}
}
