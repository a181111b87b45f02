package transport

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptrace"
	"net/textproto"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

// readSignal is a request body that closes started at its first Read.
type readSignal struct {
	r       io.Reader
	once    sync.Once
	started chan struct{}
}

func (b *readSignal) Read(p []byte) (int, error) {
	b.once.Do(func() { close(b.started) })
	return b.r.Read(p)
}

func (b *readSignal) Close() error { return nil }

// TestH3ContinueHookBeforeBody: over HTTP/3, the caller's Got100Continue
// runs before the body held back for the 100 starts to be read, as in
// net/http, which fires it before its writer sends the body. ferry's own
// hook, which lets the body go, used to run first (httptrace composition
// calls the newer hooks first), so the body's WroteRequest could come
// before the caller's Got100Continue (TestH3TwinContinueHookOrder failed
// about once in a hundred runs). The hook waits a moment for a Read: with
// the right order none can start before it returns.
func TestH3ContinueHookBeforeBody(t *testing.T) {
	tw := newH3Twin(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusContinue)
		b, _ := io.ReadAll(r.Body)
		fmt.Fprintf(w, "got %s", b)
	}), func(tr *http.Transport) { tr.ExpectContinueTimeout = time.Minute })
	for _, with1xx := range []bool{false, true} {
		t.Run(fmt.Sprint("got1xx_hook_", with1xx), func(t *testing.T) {
			body := &readSignal{r: strings.NewReader("late"), started: make(chan struct{})}
			var mu sync.Mutex // guards ev and readEarly
			var ev []string
			readEarly := false
			add := func(s string) { mu.Lock(); ev = append(ev, s); mu.Unlock() }
			trace := &httptrace.ClientTrace{
				Got100Continue: func() {
					select {
					case <-body.started:
						mu.Lock()
						readEarly = true
						mu.Unlock()
					case <-time.After(100 * time.Millisecond):
					}
					add("Got100Continue")
				},
				WroteRequest: func(httptrace.WroteRequestInfo) { add("WroteRequest") },
			}
			if with1xx {
				trace.Got1xxResponse = func(int, textproto.MIMEHeader) error { add("Got1xxResponse"); return nil }
			}
			req, err := http.NewRequest("POST", tw.url+"/continue", body)
			if err != nil {
				t.Fatal(err)
			}
			req.ContentLength = 4
			req.Header.Set("Expect", "100-continue")
			req = req.WithContext(httptrace.WithClientTrace(req.Context(), trace))
			before := tw.sent.Load()
			resp, err := tw.h3.RoundTrip(req)
			if err != nil {
				t.Fatal(err)
			}
			got, err := io.ReadAll(resp.Body)
			resp.Body.Close()
			if err != nil || string(got) != "got late" || tw.sent.Load() == before {
				t.Fatalf("body %q, err %v, sent over HTTP/3: %v", got, err, tw.sent.Load() != before)
			}
			mu.Lock()
			defer mu.Unlock()
			if readEarly {
				t.Errorf("the body was read before the caller's Got100Continue returned (hooks %v)", ev)
			}
			if i, j := slices.Index(ev, "Got100Continue"), slices.Index(ev, "WroteRequest"); i < 0 || j < i {
				t.Errorf("hooks %v: want Got100Continue before WroteRequest", ev)
			}
		})
	}
}
