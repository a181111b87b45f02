package h2conn

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/ferryhttp/ferry/internal/testpeer"
)

// TestAwaitPeerSettingsNoHookNoWait: without an OnStreamFree hook no slot
// is refused for want of SETTINGS (a second one is provisional), so
// AwaitPeerSettings has nothing to wait for and says so at once, even
// while the SETTINGS are held back; the ended context shows it did not
// wait.
func TestAwaitPeerSettingsNoHookNoWait(t *testing.T) {
	unblock := make(chan struct{})
	srv := testpeer.StartH2(t, testpeer.H2Script{BeforeSettings: func() { <-unblock }})
	t.Cleanup(func() { close(unblock) }) // before the server's cleanup
	c, err := NewClientConn(dialH2(t, srv.Addr(), false), Config{HTTP2: &http.HTTP2Config{PingTimeout: time.Hour}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	if !c.ReserveStream() || !c.ReserveStream() { // the second is provisional
		t.Fatal("no stream")
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if waited, err := c.AwaitPeerSettings(ctx); waited || err != nil {
		t.Fatalf("AwaitPeerSettings without a hook: %v, %v; want false, nil", waited, err)
	}
	c.ReleaseStream()
	c.ReleaseStream()
}
