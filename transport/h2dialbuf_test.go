package transport

import (
	"io"
	"net/http"
	"runtime"
	"testing"

	"github.com/ferryhttp/ferry/internal/selfsigned"
)

// TestH2DialBuildsNoH1Buffers: a connection that negotiates HTTP/2 never
// gets the HTTP/1.1 read and write buffers (ReadBufferSize and
// WriteBufferSize are HTTP/1.1 settings, unused by x/net). The buffer sizes
// are set huge so that building them shows plainly in the bytes a first
// request allocates, whatever else the dial allocates; the HTTP/1.1 row
// shows the measurement sees them when they are built.
func TestH2DialBuildsNoH1Buffers(t *testing.T) {
	const bufSize = 16 << 20 // each of read and write
	cert, err := selfsigned.New("127.0.0.1")
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name      string
		srv       h2ServerKind
		wantProto string
		wantBufs  bool
	}{
		{name: "h2", srv: h2ServerKind{tlsH2: true}, wantProto: "HTTP/2.0", wantBufs: false},
		{name: "h1", srv: h2ServerKind{}, wantProto: "HTTP/1.1", wantBufs: true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := startH2Server(t, tc.srv, static(hello), cert)
			std := h2BaseClient(cert)
			std.ReadBufferSize, std.WriteBufferSize = bufSize, bufSize
			tr := From(std)
			defer tr.CloseIdleConnections()
			req := newReq(t, "GET", s.URL, nil)
			var before, after runtime.MemStats
			runtime.ReadMemStats(&before)
			resp, err := tr.RoundTrip(req)
			if err != nil {
				t.Fatal(err)
			}
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			runtime.ReadMemStats(&after)
			if resp.Proto != tc.wantProto || resp.StatusCode != http.StatusOK {
				t.Fatalf("%s %d, want %s 200", resp.Proto, resp.StatusCode, tc.wantProto)
			}
			allocated := after.TotalAlloc - before.TotalAlloc
			// Everything but the buffers is well under one buffer.
			if built := allocated >= bufSize; built != tc.wantBufs {
				t.Fatalf("%d bytes allocated by the first request: HTTP/1.1 buffers built = %v, want %v", allocated, built, tc.wantBufs)
			}
		})
	}
}
