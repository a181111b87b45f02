package h2conn

import (
	"io"
	"net"
	"sync"
	"testing"

	"golang.org/x/net/http2"
)

// lateSettingsServer accepts one cleartext HTTP/2 connection and sends its
// SETTINGS (MaxConcurrentStreams: maxStreams) only when release is closed;
// it answers PINGs after that, as a server's frames come in order. It never
// answers a request: the stream ID of each HEADERS frame goes to headers.
type lateSettingsServer struct {
	ln      net.Listener
	release chan struct{}
	headers chan uint32
	once    sync.Once // closes release
	wg      sync.WaitGroup
	mu      sync.Mutex // guards conn
	conn    net.Conn
}

func startLateSettingsServer(t *testing.T, maxStreams uint32) *lateSettingsServer {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &lateSettingsServer{ln: ln, release: make(chan struct{}), headers: make(chan uint32, 64)}
	s.wg.Add(1)
	go s.serve(maxStreams)
	t.Cleanup(func() {
		s.sendSettings()
		ln.Close()
		s.mu.Lock()
		if s.conn != nil {
			s.conn.Close()
		}
		s.mu.Unlock()
		s.wg.Wait()
	})
	return s
}

// sendSettings lets the server send its SETTINGS.
func (s *lateSettingsServer) sendSettings() { s.once.Do(func() { close(s.release) }) }

func (s *lateSettingsServer) serve(maxStreams uint32) {
	defer s.wg.Done()
	c, err := s.ln.Accept()
	if err != nil {
		return
	}
	s.mu.Lock()
	s.conn = c
	s.mu.Unlock()
	preface := make([]byte, len(http2.ClientPreface))
	if _, err := io.ReadFull(c, preface); err != nil {
		return
	}
	<-s.release
	fr := http2.NewFramer(c, c)
	if fr.WriteSettings(http2.Setting{ID: http2.SettingMaxConcurrentStreams, Val: maxStreams}) != nil {
		return
	}
	for {
		f, err := fr.ReadFrame()
		if err != nil {
			return
		}
		switch f := f.(type) {
		case *http2.SettingsFrame:
			if !f.IsAck() && fr.WriteSettingsAck() != nil {
				return
			}
		case *http2.PingFrame:
			if !f.IsAck() && fr.WritePing(true, f.Data) != nil {
				return
			}
		case *http2.HeadersFrame:
			select {
			case s.headers <- f.StreamID:
			default:
			}
		}
	}
}

// TestStreamFreeWaitsForPeerSettings: with an OnStreamFree hook, only one
// slot is handed out until the server's SETTINGS are known to have arrived
// (x/net assumes 100 streams before them, and in wrapped mode reservations
// taken then deadlock net/http's writer once the real limit is lower); the
// hook is called when they are, and the server's limit holds from then on.
func TestStreamFreeWaitsForPeerSettings(t *testing.T) {
	const maxStreams = 2
	srv := startLateSettingsServer(t, maxStreams)
	nc := dialH2(t, srv.ln.Addr().String(), false)
	c, err := NewClientConn(nc, Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	called := make(chan struct{}, 16)
	if !c.ReserveStream() {
		t.Fatal("first stream refused")
	}
	c.OnStreamFree(func() {
		select {
		case called <- struct{}{}:
		default:
		}
	})
	if c.ReserveStream() {
		t.Fatal("second stream reserved before the server's SETTINGS arrived")
	}
	srv.sendSettings()
	<-called // the hook runs once the limit is known
	for !c.peerLimitKnown() {
		<-called // a lag-watcher call may come first; the next one follows
	}
	got := 1
	for range maxStreams + 1 {
		if c.ReserveStream() {
			got++
		}
	}
	if got != maxStreams {
		t.Fatalf("%d slots reserved after SETTINGS, want the server's %d", got, maxStreams)
	}
	for range got {
		c.ReleaseStream()
	}
	if _, idle := c.IdleSince(); !idle {
		t.Fatal("slot leaked")
	}
}
