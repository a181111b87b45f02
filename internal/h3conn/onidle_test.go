package h3conn

import (
	"io"
	"net/http"
	"sync/atomic"
	"testing"
)

// TestOnIdleWhenLastStreamGiven: Config.OnIdle is called once each time a
// Conn's last stream in use or reserved is given back (a response body
// done, a reservation released, a RoundTrip that failed), never while a
// stream is still held, and outside the Conn's lock (it may close the
// Conn).
func TestOnIdleWhenLastStreamGiven(t *testing.T) {
	s := startH3(t, http.HandlerFunc(echoHandler), "localhost")
	var calls atomic.Int32
	var c *Conn
	d := newTestDialer(t, s, func(cfg *Config) {
		cfg.OnIdle = func(got *Conn) {
			if _, idle := got.IdleSince(); !idle { // takes c.mu: not held here
				t.Error("OnIdle called with a stream held")
			}
			calls.Add(1)
		}
	})
	c = dialTest(t, d, s)
	get := func() *http.Response {
		req, _ := http.NewRequest("GET", "https://localhost/", nil)
		resp, err := c.RoundTrip(req)
		if err != nil {
			t.Fatal(err)
		}
		return resp
	}

	r1, r2 := get(), get()
	io.Copy(io.Discard, r1.Body)
	r1.Body.Close()
	if n := calls.Load(); n != 0 {
		t.Fatalf("OnIdle called %d times with a request still in flight", n)
	}
	io.Copy(io.Discard, r2.Body)
	r2.Body.Close()
	if n := calls.Load(); n != 1 {
		t.Fatalf("OnIdle called %d times after the last body ended, want 1", n)
	}

	if !c.ReserveStream() {
		t.Fatal("ReserveStream failed")
	}
	c.ReleaseStream()
	if n := calls.Load(); n != 2 {
		t.Fatalf("OnIdle called %d times after a reservation was released, want 2", n)
	}

	// A RoundTrip that fails gives its stream back too; OnIdle may close c.
	d.cfg.OnIdle = func(got *Conn) { calls.Add(1); got.CloseIfIdle() }
	req, _ := http.NewRequest("GET", "https://localhost/", errReader{})
	if _, err := c.RoundTrip(req); err == nil {
		t.Fatal("RoundTrip with a failing body succeeded")
	}
	if n := calls.Load(); n != 3 {
		t.Fatalf("OnIdle called %d times after a failed RoundTrip, want 3", n)
	}
	if c.Usable() {
		t.Fatal("CloseIfIdle from OnIdle did not close the conn")
	}
}

type errReader struct{}

func (errReader) Read([]byte) (int, error) { return 0, io.ErrUnexpectedEOF }
