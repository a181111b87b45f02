package transport

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"reflect"
	"regexp"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// Request bodies that fail, under concurrency and retries on reused
// connections the server closed: a body whose Read fails midway, GetBody
// that fails when a retry needs it, a body that cannot be rewound, a body
// whose Close blocks, and requests that fail before any connection. Every
// body the transport was given or obtained from GetBody must be closed, and
// the caller gets the error net/http gives (compared side by side: the set
// of error texts and whether errors.Is finds the body's or GetBody's own
// error).

// stressReadFromPrefix is the *net.OpError net/http wraps around a body's
// read error when it copies a body of known length with the connection's
// ReadFrom ("readfrom tcp 127.0.0.1:1->127.0.0.1:2: <the body's error>");
// ferry returns the body's error itself. errors.Is finds it in both, which
// the rows compare; the texts are compared without the prefix.
var stressReadFromPrefix = regexp.MustCompile(`^readfrom tcp [^ ]+->[^ ]+: `)

var (
	errStressRead    = errors.New("test: body read failed")
	errStressGetBody = errors.New("test: GetBody failed")
)

// stressLedger makes request bodies and counts their Close calls.
type stressLedger struct {
	mu     sync.Mutex // guards bodies
	bodies []*stressLedgerBody
}

type stressLedgerBody struct {
	r         io.Reader
	failAfter int // the Read that would pass this many bytes fails; < 0 never
	n         int
	block     <-chan struct{} // Close waits for it (or 3 s) when set
	blocked   atomic.Bool     // Close gave up waiting
	closes    atomic.Int32
}

func (l *stressLedger) body(s string, failAfter int, block <-chan struct{}) *stressLedgerBody {
	b := &stressLedgerBody{r: strings.NewReader(s), failAfter: failAfter, block: block}
	l.mu.Lock()
	l.bodies = append(l.bodies, b)
	l.mu.Unlock()
	return b
}

func (b *stressLedgerBody) Read(p []byte) (int, error) {
	if b.failAfter >= 0 && b.n+len(p) > b.failAfter {
		p = p[:b.failAfter-b.n]
		if len(p) == 0 {
			return 0, errStressRead
		}
	}
	n, err := b.r.Read(p)
	b.n += n
	return n, err
}

func (b *stressLedgerBody) Close() error {
	b.closes.Add(1)
	if b.block != nil {
		select {
		case <-b.block:
		case <-time.After(3 * time.Second):
			b.blocked.Store(true)
		}
	}
	return nil
}

// unclosed waits (bounded) for every body to be closed, and returns the
// number still unclosed and the number closed more than once.
func (l *stressLedger) unclosed() (unclosed, twice int) {
	deadline := time.Now().Add(5 * time.Second)
	for {
		unclosed, twice = 0, 0
		l.mu.Lock()
		for _, b := range l.bodies {
			switch c := b.closes.Load(); {
			case c == 0:
				unclosed++
			case c > 1:
				twice++
			}
		}
		l.mu.Unlock()
		if unclosed == 0 || time.Now().After(deadline) {
			return unclosed, twice
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// stressCloseSecondServer answers the first request of every connection
// and closes the connection when it has read the second one (a server
// that dropped a keep-alive connection as the client reused it). The
// first answers wait until warm connections have a request (or 10 s), so
// that concurrent warm-up requests each open a connection of their own.
func stressCloseSecondServer(t *testing.T, warm int) *testServer {
	var mu sync.Mutex // guards firsts
	firsts := 0
	all := make(chan struct{})
	return startRawServer(t, func(c *rawConn) {
		if _, err := c.readRequest(); err != nil {
			return
		}
		mu.Lock()
		if firsts++; firsts == warm {
			close(all)
		}
		mu.Unlock()
		select {
		case <-all:
		case <-time.After(10 * time.Second):
		case <-c.s.close:
			return
		}
		if _, err := io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"); err != nil {
			return
		}
		c.readRequest()
	})
}

type stressBodyRow struct {
	name string
	// warm GETs (concurrently) before the requests, so that they reuse
	// connections.
	warm int
	// mk builds request i against u, its bodies from l.
	mk func(u string, l *stressLedger) *http.Request
	// proxyErr makes the transport's Proxy fail.
	proxyErr bool
	// server: "echo" reads the body and answers, "close2" is
	// stressCloseSecondServer, "none" is a port nothing listens on.
	server string
}

func stressPost(u, s string, l *stressLedger, failAfter int, known bool) *http.Request {
	b := l.body(s, failAfter, nil)
	req, _ := http.NewRequest("POST", u, b)
	if known {
		req.ContentLength = int64(len(s))
	}
	return req
}

func withGetBody(req *http.Request, l *stressLedger, s string, fail bool) *http.Request {
	req.Header.Set("Idempotency-Key", "k") // replayable under net/http's rules
	req.GetBody = func() (io.ReadCloser, error) {
		if fail {
			return nil, errStressGetBody
		}
		return l.body(s, -1, nil), nil
	}
	return req
}

var stressBodyRows = []stressBodyRow{
	{name: "read fails midway, known length", server: "echo", mk: func(u string, l *stressLedger) *http.Request {
		return stressPost(u, strings.Repeat("a", 10000), l, 5000, true)
	}},
	{name: "read fails midway, chunked", server: "echo", mk: func(u string, l *stressLedger) *http.Request {
		return stressPost(u, strings.Repeat("a", 10000), l, 5000, false)
	}},
	{name: "read fails at once, reused connections", server: "echo", warm: 20, mk: func(u string, l *stressLedger) *http.Request {
		return stressPost(u, strings.Repeat("a", 100), l, 0, true)
	}},
	{name: "server closed reused connection, GetBody ok", server: "close2", warm: 20, mk: func(u string, l *stressLedger) *http.Request {
		return withGetBody(stressPost(u, "payload", l, -1, true), l, "payload", false)
	}},
	{name: "server closed reused connection, GetBody fails", server: "close2", warm: 20, mk: func(u string, l *stressLedger) *http.Request {
		return withGetBody(stressPost(u, "payload", l, -1, true), l, "payload", true)
	}},
	{name: "server closed reused connection, no GetBody", server: "close2", warm: 20, mk: func(u string, l *stressLedger) *http.Request {
		req := stressPost(u, "payload", l, -1, true)
		req.Header.Set("Idempotency-Key", "k")
		return req
	}},
	{name: "connection refused", server: "none", mk: func(u string, l *stressLedger) *http.Request {
		return stressPost(u, "payload", l, -1, true)
	}},
	{name: "invalid header", server: "echo", mk: func(u string, l *stressLedger) *http.Request {
		req := stressPost(u, "payload", l, -1, true)
		req.Header.Set("X-Bad", "a\nb")
		return req
	}},
	{name: "unsupported scheme", server: "echo", mk: func(u string, l *stressLedger) *http.Request {
		return stressPost(strings.Replace(u, "http://", "ftp://", 1), "payload", l, -1, true)
	}},
	{name: "proxy fails", server: "echo", proxyErr: true, mk: func(u string, l *stressLedger) *http.Request {
		return stressPost(u, "payload", l, -1, true)
	}},
	{name: "context cancelled before", server: "echo", mk: func(u string, l *stressLedger) *http.Request {
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		return stressPost(u, "payload", l, -1, true).WithContext(ctx)
	}},
}

func TestReqBodyFailuresWithRetries(t *testing.T) {
	const n = 20
	for _, row := range stressBodyRows {
		t.Run(row.name, func(t *testing.T) {
			var got [2][]any
			for i, side := range []string{"nethttp", "ferry"} {
				stressLeakCheck(t, func(t *testing.T) {
					got[i] = stressRunBodyRow(t, side, row, n)
				})
			}
			if !reflect.DeepEqual(got[0], got[1]) {
				t.Errorf("differs\nnet/http: %q\nferry:    %q", got[0], got[1])
			} else {
				t.Logf("both: %q", got[1])
			}
		})
	}
}

func stressRunBodyRow(t *testing.T, side string, row stressBodyRow, n int) []any {
	var u string
	switch row.server {
	case "echo":
		u = startHandlerServer(t, func(w http.ResponseWriter, r *http.Request) {
			io.WriteString(w, "ok")
		}, false, nil).URL
	case "close2":
		u = stressCloseSecondServer(t, row.warm).URL
	case "none":
		s := startRawServer(t, func(c *rawConn) {})
		s.ln.Close()
		u = s.URL
	}
	std := &http.Transport{MaxIdleConnsPerHost: 100}
	if row.proxyErr {
		std.Proxy = func(*http.Request) (*url.URL, error) { return nil, errors.New("test: no proxy today") }
	}
	var rt http.RoundTripper = std
	if side == "ferry" {
		rt = From(std)
	}
	defer closeIdle(rt)
	var wg sync.WaitGroup
	for i := 0; i < row.warm; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err, _ := stressGetAll(rt, u, 10*time.Second); err != nil {
				t.Errorf("warm GET: %v", err)
			}
		}()
	}
	wg.Wait()
	var l stressLedger
	var mu sync.Mutex // guards texts, isRead, isGetBody
	texts := map[string]bool{}
	isRead, isGetBody := 0, 0
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			req := row.mk(u, &l)
			ctx, cancel := context.WithTimeout(req.Context(), 20*time.Second)
			defer cancel()
			resp, err := rt.RoundTrip(req.WithContext(ctx))
			text := "ok"
			if err == nil {
				b, rerr := io.ReadAll(resp.Body)
				resp.Body.Close()
				if rerr != nil || string(b) != "ok" {
					text = fmt.Sprintf("body %q %v", b, rerr)
				}
			} else {
				text = stressReadFromPrefix.ReplaceAllString(normalizeErr(err), "")
			}
			mu.Lock()
			texts[text] = true
			if errors.Is(err, errStressRead) {
				isRead++
			}
			if errors.Is(err, errStressGetBody) {
				isGetBody++
			}
			mu.Unlock()
		}(i)
	}
	wg.Wait()
	unclosed, twice := l.unclosed()
	if unclosed > 0 {
		t.Errorf("%s: %d of %d request bodies never closed", side, unclosed, len(l.bodies))
	}
	var ts []string
	for k := range texts {
		ts = append(ts, k)
	}
	sort.Strings(ts)
	return []any{ts, "errors.Is(read error)", isRead, "errors.Is(GetBody error)", isGetBody, "closed twice", twice}
}

// TestReqBodyBlockingClose: a request body whose Close blocks (until
// the test releases it) must not hold up the response: net/http closes the
// body on its write loop and returns the response meanwhile.
func TestReqBodyBlockingClose(t *testing.T) {
	for _, side := range []string{"nethttp", "ferry"} {
		t.Run(side, func(t *testing.T) {
			stressLeakCheck(t, func(t *testing.T) {
				srv := startHandlerServer(t, func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok") }, false, nil)
				std := &http.Transport{}
				var rt http.RoundTripper = std
				if side == "ferry" {
					rt = From(std)
				}
				defer closeIdle(rt)
				var l stressLedger
				release := make(chan struct{})
				var wg sync.WaitGroup
				for i := 0; i < 10; i++ {
					wg.Add(1)
					go func() {
						defer wg.Done()
						b := l.body("payload", -1, release)
						req, _ := http.NewRequest("POST", srv.URL, b)
						req.ContentLength = 7
						resp, err := rt.RoundTrip(req)
						if err != nil {
							t.Errorf("%v", err)
							return
						}
						body, err := io.ReadAll(resp.Body)
						resp.Body.Close()
						if err != nil || string(body) != "ok" {
							t.Errorf("body %q %v", body, err)
						}
						if b.blocked.Load() {
							t.Errorf("the response waited for the request body's Close")
						}
					}()
				}
				wg.Wait()
				close(release)
				if unclosed, _ := l.unclosed(); unclosed > 0 {
					t.Errorf("%d bodies never closed", unclosed)
				}
				stressFinalGet(t, rt, srv.URL)
			})
		})
	}
}

// TestReqBodyFailsOverH2H3: a request body whose Read fails midway,
// 20 at once, over HTTP/2 (side by side with net/http) and HTTP/3 (ferry
// only): the caller's error must be found with errors.Is, and every body
// closed.
func TestReqBodyFailsOverH2H3(t *testing.T) {
	const n = 20
	for _, proto := range []string{"h2", "h3"} {
		for _, known := range []bool{true, false} {
			var got [2][]any
			for i, side := range []string{"nethttp", "ferry"} {
				name := fmt.Sprintf("%s/known=%v/%s", proto, known, side)
				t.Run(name, func(t *testing.T) {
					if proto == "h3" && side == "nethttp" {
						t.Skip("net/http does not speak HTTP/3")
					}
					stressLeakCheck(t, func(t *testing.T) {
						got[i] = stressBodyFailsOver(t, proto, side, known, n)
					})
				})
			}
			if proto == "h2" && !reflect.DeepEqual(got[0], got[1]) {
				t.Errorf("%s known=%v differs\nnet/http: %q\nferry:    %q", proto, known, got[0], got[1])
			}
		}
	}
}

func stressBodyFailsOver(t *testing.T, proto, side string, known bool, n int) []any {
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		io.WriteString(w, "ok")
	})
	var u string
	if proto == "h3" {
		u = startWrapped(t, h)
	} else {
		u = startTLSProto(t, h, true)
	}
	std := &http.Transport{TLSClientConfig: h3Cert(t).ClientConfig(), ForceAttemptHTTP2: true}
	var rt http.RoundTripper = std
	var tr *Transport
	if side == "ferry" {
		tr = From(std)
		rt = tr
	}
	defer closeIdle(rt)
	if proto == "h3" {
		fetch(t, rt, "GET", u, nil)
		eventually(t, "HTTP/3 ready", func() bool { return h3Ready(t, tr, u) })
	}
	var l stressLedger
	var mu sync.Mutex // guards texts and isRead
	texts := map[string]bool{}
	isRead := 0
	var wg sync.WaitGroup
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			req := stressPost(u, strings.Repeat("b", 100000), &l, 50000, known).WithContext(ctx)
			resp, err := rt.RoundTrip(req)
			text := ""
			if err == nil {
				b, rerr := io.ReadAll(resp.Body)
				resp.Body.Close()
				text = fmt.Sprintf("%s response %q %v", resp.Proto, b, rerr)
			} else {
				text = normalizeErr(err)
			}
			mu.Lock()
			texts[text] = true
			if errors.Is(err, errStressRead) {
				isRead++
			}
			mu.Unlock()
		}()
	}
	wg.Wait()
	if unclosed, _ := l.unclosed(); unclosed > 0 {
		t.Errorf("%d of %d request bodies never closed", unclosed, n)
	}
	if isRead != n {
		t.Errorf("%d of %d errors are the body's own error (errors.Is); texts %v", isRead, n, texts)
	}
	var ts []string
	for k := range texts {
		ts = append(ts, k)
	}
	sort.Strings(ts)
	t.Logf("%s: %q", side, ts)
	if tr != nil {
		stressPoolEmpty(t, tr)
	}
	return []any{ts, isRead}
}

// TestEarlyResponseDuringUpload: 20 concurrent uploads of 8 MiB
// streaming bodies to a server that reads 1 KiB, answers 413 with
// "Connection: close" and then either drains the upload ("drain") or
// closes at once ("close": unread data makes the close a reset, which can
// race the answer, for net/http too). net/http returns the server's answer
// when it got it; ferry must return it at least as often, and every body
// must be closed.
func TestEarlyResponseDuringUpload(t *testing.T) {
	for _, how := range []string{"drain", "close"} {
		t.Run(how, func(t *testing.T) { stressEarlyResponse(t, how) })
	}
}

func stressEarlyResponse(t *testing.T, how string) {
	const n = 20
	var got [2]map[string]int
	for i, side := range []string{"nethttp", "ferry"} {
		stressLeakCheck(t, func(t *testing.T) {
			srv := startRawServer(t, func(c *rawConn) {
				if _, err := http.ReadRequest(c.br); err != nil {
					return
				}
				io.CopyN(io.Discard, c.br, 1024)
				io.WriteString(c, "HTTP/1.1 413 Request Entity Too Large\r\nConnection: close\r\nContent-Length: 3\r\n\r\nbig")
				if how == "drain" {
					c.Conn.(interface{ CloseWrite() error }).CloseWrite()
					io.Copy(io.Discard, c) // until the client gives up the upload
				}
			})
			std := &http.Transport{}
			var rt http.RoundTripper = std
			var tr *Transport
			if side == "ferry" {
				tr = From(std)
				rt = tr
			}
			defer closeIdle(rt)
			var l stressLedger
			var mu sync.Mutex // guards outcomes
			outcomes := map[string]int{}
			var wg sync.WaitGroup
			for j := 0; j < n; j++ {
				wg.Add(1)
				go func() {
					defer wg.Done()
					ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
					defer cancel()
					req := stressPost(srv.URL, strings.Repeat("u", 8<<20), &l, -1, false).WithContext(ctx)
					resp, err := rt.RoundTrip(req)
					o := ""
					if err != nil {
						o = "error " + stressErrClass(err)
					} else {
						b, rerr := io.ReadAll(resp.Body)
						resp.Body.Close()
						o = fmt.Sprintf("%d %q %v", resp.StatusCode, b, rerr)
					}
					mu.Lock()
					outcomes[o]++
					mu.Unlock()
				}()
			}
			wg.Wait()
			if unclosed, _ := l.unclosed(); unclosed > 0 {
				t.Errorf("%s: %d of %d request bodies never closed", side, unclosed, n)
			}
			got[i] = outcomes
			t.Logf("%s: %v", side, outcomes)
			if tr != nil {
				stressPoolEmpty(t, tr)
			}
		})
	}
	if got[1][`413 "big" <nil>`] < got[0][`413 "big" <nil>`] {
		t.Errorf("ferry returned the server's 413 %d times, net/http %d times", got[1][`413 "big" <nil>`], got[0][`413 "big" <nil>`])
	}
}
