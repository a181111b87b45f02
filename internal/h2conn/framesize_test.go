package h2conn

import (
	"bytes"
	"fmt"
	"io"
	"sync"
	"testing"

	"golang.org/x/net/http2"

	"github.com/ferryhttp/ferry/internal/testpeer"
)

// uploadFrame is one DATA frame a server read.
type uploadFrame struct {
	len int
	end bool
}

// frameRecorder keeps the DATA frames and bytes each stream's upload
// arrived in.
type frameRecorder struct {
	mu     sync.Mutex // guards frames and bodies
	frames map[uint32][]uploadFrame
	bodies map[uint32][]byte
}

// uploadServer is a frame server announcing SETTINGS_MAX_FRAME_SIZE
// peerMax and windows large enough that no upload waits for one: a 1 MiB
// stream window in its SETTINGS, and an 8 MiB connection window opened in
// its answer to the first request (a GET), before the answer itself. Every
// upload is answered once its END_STREAM is read.
func uploadServer(t *testing.T, peerMax uint32) (*testpeer.H2Server, *frameRecorder) {
	rec := &frameRecorder{frames: map[uint32][]uploadFrame{}, bodies: map[uint32][]byte{}}
	srv := testpeer.StartH2(t, testpeer.H2Script{
		Settings: []http2.Setting{
			{ID: http2.SettingMaxFrameSize, Val: peerMax},
			{ID: http2.SettingInitialWindowSize, Val: 1 << 20},
		},
		OnHeaders: func(_, k int, fr *http2.Framer, id uint32) error {
			if k != 0 {
				return nil // an upload: answered at its end
			}
			if err := fr.WriteWindowUpdate(0, 8<<20); err != nil {
				return err
			}
			return testpeer.H2OK(fr, id)
		},
		OnData: func(_ int, fr *http2.Framer, id uint32, data []byte, end bool) error {
			rec.mu.Lock()
			rec.frames[id] = append(rec.frames[id], uploadFrame{len(data), end})
			rec.bodies[id] = append(rec.bodies[id], data...)
			rec.mu.Unlock()
			if end {
				return testpeer.H2OK(fr, id)
			}
			return nil
		},
	})
	return srv, rec
}

// TestUploadFramesAsLargeAsThePeerTakes pins how a request body is cut
// into DATA frames, for peers announcing the smallest frame size, 32 KiB,
// 64 KiB (exactly a 64 KiB body, which reads sized in record-filling
// frames would cut in two) and net/http's server's 1 MiB: no frame exceeds the peer's limit; a
// body that fits one frame (and the body buffer) is one frame, as net/http
// sends it; every other frame but the last fills whole TLS records with
// its header; and the server reads exactly the body sent.
func TestUploadFramesAsLargeAsThePeerTakes(t *testing.T) {
	for _, peerMax := range []uint32{16384, 32768, 64 << 10, 1 << 20} {
		t.Run(fmt.Sprint(peerMax), func(t *testing.T) {
			srv, rec := uploadServer(t, peerMax)
			c, err := NewClientConn(dialH2(t, srv.Addr(), false), Config{})
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			url := "http://" + srv.Addr() + "/"
			// The first answer brings the connection window with it.
			resp, err := c.RoundTrip(newRequest(t, "GET", url, nil))
			if err != nil {
				t.Fatal(err)
			}
			readAll(t, resp)
			var id uint32 = 1
			for _, size := range []int{100, 16375, 16376, 40000, 64 << 10, sendBufLen - 1, sendBufLen, 300 << 10} {
				id += 2
				data := make([]byte, size)
				for i := range data {
					data[i] = byte(i*7 + i>>12)
				}
				req := newRequest(t, "POST", url, nil)
				req.Body = io.NopCloser(bytes.NewReader(data)) // not in memory: sent by writeBody
				req.ContentLength = int64(size)
				resp, err := c.RoundTrip(req)
				if err != nil {
					t.Fatalf("%d bytes: %v", size, err)
				}
				readAll(t, resp)

				rec.mu.Lock()
				frames, body := rec.frames[id], rec.bodies[id]
				rec.mu.Unlock()
				if !bytes.Equal(body, data) {
					t.Fatalf("%d bytes: the server read %d bytes, not the body sent", size, len(body))
				}
				for i, f := range frames {
					last := i == len(frames)-1
					if f.end != last {
						t.Fatalf("%d bytes: frame %d of %d has END_STREAM %v", size, i+1, len(frames), f.end)
					}
					if f.len > int(peerMax) {
						t.Fatalf("%d bytes: a %d-byte frame, above the peer's %d", size, f.len, peerMax)
					}
					if !last && (f.len+frameHeaderLen)%tlsRecordLen != 0 {
						t.Fatalf("%d bytes: frames %v: frame %d (%d bytes) is not the last and does not fill whole TLS records", size, frames, i+1, f.len)
					}
				}
				if size < sendBufLen && size <= int(peerMax) && len(frames) != 1 {
					t.Fatalf("%d bytes in frames %v, want one frame", size, frames)
				}
			}
		})
	}
}
