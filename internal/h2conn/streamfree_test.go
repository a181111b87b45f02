package h2conn

import (
	"sync"
	"testing"

	"github.com/ferryhttp/ferry/internal/testpeer"
	"golang.org/x/net/http2"
)

// lateSettingsServer is a cleartext HTTP/2 server that sends its SETTINGS
// (MaxConcurrentStreams: maxStreams) only once sendSettings is called; it
// answers PINGs after that, as a server's frames come in order. It never
// answers a request: the stream ID of each HEADERS frame goes to headers.
type lateSettingsServer struct {
	*testpeer.H2Server
	release chan struct{}
	headers chan uint32
	once    sync.Once // closes release
}

func startLateSettingsServer(t *testing.T, maxStreams uint32) *lateSettingsServer {
	t.Helper()
	s := &lateSettingsServer{release: make(chan struct{}), headers: make(chan uint32, 64)}
	s.H2Server = testpeer.StartH2(t, testpeer.H2Script{
		Settings:       []http2.Setting{{ID: http2.SettingMaxConcurrentStreams, Val: maxStreams}},
		BeforeSettings: func() { <-s.release },
		OnHeaders: func(_, _ int, _ *http2.Framer, id uint32) error {
			select {
			case s.headers <- id:
			default:
			}
			return nil
		},
	})
	t.Cleanup(s.sendSettings) // runs before the server's own cleanup
	return s
}

// sendSettings lets the server send its SETTINGS.
func (s *lateSettingsServer) sendSettings() { s.once.Do(func() { close(s.release) }) }

// TestStreamFreeWaitsForPeerSettings: with an OnStreamFree hook, only one
// slot is handed out until the server's SETTINGS are known to have arrived
// (100 streams are assumed before them, more than the server may allow);
// the hook is called when they are, and the server's limit holds from then on.
func TestStreamFreeWaitsForPeerSettings(t *testing.T) {
	const maxStreams = 2
	srv := startLateSettingsServer(t, maxStreams)
	nc := dialH2(t, srv.Addr(), false)
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
	for !peerSettingsKnown(c) {
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
