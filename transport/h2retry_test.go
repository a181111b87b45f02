package transport

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ferryhttp/ferry/internal/h2conn"
	"github.com/ferryhttp/ferry/internal/testpeer"
	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
)

// HTTP/2 requests the server did not process (REFUSED_STREAM, GOAWAY): how
// many times they are sent, how long ferry waits in between, and the error
// the caller gets when they are not sent again or the context ends, each
// compared with net/http's HTTP/2 client where the scenario is
// deterministic for both. Every comparison runs the scenario with
// net/http.Transport and with ferry (From of the same http.Transport), each
// against its own fresh loopback server.

// compareImpls runs run for net/http and for ferry and fails when the
// results differ.
func compareImpls(t *testing.T, run func(t *testing.T, impl string) []any) {
	t.Helper()
	var got [2][]any
	for i, impl := range []string{"nethttp", "ferry"} {
		got[i] = run(t, impl)
	}
	if !reflect.DeepEqual(got[0], got[1]) {
		t.Errorf("observations differ\nnet/http: %#v\nferry:    %#v", got[0], got[1])
	}
}

// implClient returns std, or From(std) for impl "ferry"; the test's
// cleanup closes its idle connections.
func implClient(t *testing.T, impl string, std *http.Transport) http.RoundTripper {
	var rt http.RoundTripper = std
	if impl == "ferry" {
		rt = From(std)
	}
	t.Cleanup(func() { closeIdle(rt) })
	return rt
}

// implH2c is a client speaking HTTP/2 with prior knowledge to http:// URLs
// (the raw frame server in internal/testpeer is cleartext).
func implH2c(t *testing.T, impl string) http.RoundTripper {
	return implClient(t, impl, &http.Transport{Protocols: protocolsOf("h2c")})
}

// h2ErrText is err's text with addresses normalised.
func h2ErrText(err error) string {
	if err == nil {
		return ""
	}
	return normalizeErr(err)
}

// refuseFirst returns a script that resets the first n streams of the
// server (over all its connections) with REFUSED_STREAM and answers the
// others; n < 0 refuses every stream.
func refuseFirst(n int) func(conn, stream int, fr *http2.Framer, id uint32) error {
	var mu sync.Mutex // guards seen
	seen := 0
	return func(conn, stream int, fr *http2.Framer, id uint32) error {
		mu.Lock()
		k := seen
		seen++
		mu.Unlock()
		if n < 0 || k < n {
			return fr.WriteRSTStream(id, http2.ErrCodeRefusedStream)
		}
		return testpeer.H2OK(fr, id)
	}
}

// TestH2NotRetriedErrorMatchesNetHTTP: a POST whose streaming body has no
// GetBody is refused (REFUSED_STREAM) or falls beyond a GOAWAY. Neither
// implementation sends it again, and both say why with net/http's "cannot
// retry err [...] after Request.Body was written" (ferry returned its
// internal "request not processed ..., safe to retry" error before).
func TestH2NotRetriedErrorMatchesNetHTTP(t *testing.T) {
	rows := []struct {
		name   string
		warm   bool
		script func(conn, stream int, fr *http2.Framer, id uint32) error
	}{
		{name: "refused-stream", script: refuseFirst(-1)},
		{name: "goaway-earlier-stream", warm: true, script: func(conn, stream int, fr *http2.Framer, id uint32) error {
			if stream == 0 {
				return testpeer.H2OK(fr, id)
			}
			return fr.WriteGoAway(id-2, http2.ErrCodeNo, nil)
		}},
	}
	for _, row := range rows {
		t.Run(row.name, func(t *testing.T) {
			compareImpls(t, func(t *testing.T, impl string) []any {
				s := testpeer.StartH2(t, testpeer.H2Script{OnHeaders: row.script})
				rt := implH2c(t, impl)
				url := "http://" + s.Addr() + "/"
				if row.warm {
					if o := observe(rt, newReq(t, "GET", url, nil)); o.Err != "" {
						t.Fatalf("%s: warm request: %s", impl, o.Err)
					}
				}
				body := &countingBody{Reader: strings.NewReader("payload")}
				req := newReq(t, "POST", url, nil)
				req.Body = body
				_, err := rt.RoundTrip(req)
				_, streams := s.Counts()
				return []any{h2ErrText(err), streams, body.closed.Load()}
			})
		})
	}
}

// TestH2NotRetriedErrorWrapsStreamError: ferry's "cannot retry" error
// wraps the stream error (net/http formats it into the text only), so
// errors.As still finds the REFUSED_STREAM code; it is not the internal
// not-processed classification.
func TestH2NotRetriedErrorWrapsStreamError(t *testing.T) {
	s := testpeer.StartH2(t, testpeer.H2Script{OnHeaders: refuseFirst(-1)})
	tr := h2cTransport()
	defer tr.CloseIdleConnections()
	req := newReq(t, "POST", "http://"+s.Addr()+"/", &streamBody{strings.NewReader("payload")})
	_, err := tr.RoundTrip(req)
	var se http2.StreamError
	if !errors.As(err, &se) || se.Code != http2.ErrCodeRefusedStream {
		t.Fatalf("err = %v, want a REFUSED_STREAM stream error in the chain", err)
	}
	var np *h2conn.NotProcessedError
	if errors.As(err, &np) {
		t.Fatalf("err = %v: the internal classification reached the caller", err)
	}
}

// TestH2RetryAttempts: a request refused again and again is sent at most
// eight times (seven retries), as net/http's HTTP/2 client does; when the
// retries are spent the caller gets the last attempt's stream error itself.
// The waits are shortened (a millisecond unit); the twin against net/http
// with real waits is TestH2RetryAttemptsMatchNetHTTP.
func TestH2RetryAttempts(t *testing.T) {
	rows := []struct {
		name    string
		refused int // -1: every stream
		status  int
		streams int
	}{
		{name: "refused-once", refused: 1, status: 200, streams: 2},
		{name: "refused-seven-times", refused: 7, status: 200, streams: 8},
		{name: "refused-always", refused: -1, streams: 8},
	}
	for _, row := range rows {
		t.Run(row.name, func(t *testing.T) {
			s := testpeer.StartH2(t, testpeer.H2Script{OnHeaders: refuseFirst(row.refused)})
			tr := h2cTransport()
			tr.h2.backoffUnit = time.Millisecond
			defer tr.CloseIdleConnections()
			resp, err := tr.RoundTrip(newReq(t, "GET", "http://"+s.Addr()+"/", nil))
			o := observeResponse(resp, err)
			if _, st := s.Counts(); o.Status != row.status || st != row.streams {
				t.Fatalf("status %d (err %q) after %d attempts, want %d after %d", o.Status, o.Err, st, row.status, row.streams)
			}
			if row.status != 0 {
				return
			}
			var se http2.StreamError
			var np *h2conn.NotProcessedError
			if !errors.As(err, &se) || se.Code != http2.ErrCodeRefusedStream || errors.As(err, &np) {
				t.Fatalf("err = %v, want the REFUSED_STREAM stream error itself", err)
			}
			// Eight attempts on the one connection: streams 1, 3, ... 15.
			if got, want := h2ErrText(err), "stream error: stream ID 15; REFUSED_STREAM; received from peer"; got != want {
				t.Fatalf("err = %q, want %q", got, want)
			}
		})
	}
}

// TestH2RetryAttemptsMatchNetHTTP: the server refuses the first seven
// streams and answers the eighth, or refuses every stream. Both
// implementations make up to eight attempts (ferry made seven before), so
// the first succeeds and the second ends with the stream error. net/http's
// waits cannot be shortened (about 63 to 67 s), so this is skipped with
// -short; all four runs go at once.
func TestH2RetryAttemptsMatchNetHTTP(t *testing.T) {
	if testing.Short() {
		t.Skip("about 67 s of real backoff")
	}
	rows := []struct {
		name    string
		refused int
	}{
		{name: "refused-seven-times", refused: 7},
		{name: "refused-always", refused: -1},
	}
	impls := []string{"nethttp", "ferry"}
	got := make([][2][]any, len(rows))
	var wg sync.WaitGroup
	for r, row := range rows {
		for i, impl := range impls {
			s := testpeer.StartH2(t, testpeer.H2Script{OnHeaders: refuseFirst(row.refused)})
			rt := implH2c(t, impl)
			req := newReq(t, "GET", "http://"+s.Addr()+"/", nil)
			wg.Add(1)
			go func() {
				defer wg.Done()
				ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
				defer cancel()
				resp, err := rt.RoundTrip(req.WithContext(ctx))
				o := observeResponse(resp, err)
				_, streams := s.Counts()
				got[r][i] = []any{o.Status, o.Body, h2ErrText(err), streams}
			}()
		}
	}
	wg.Wait()
	for r, row := range rows {
		if !reflect.DeepEqual(got[r][0], got[r][1]) {
			t.Errorf("%s: observations differ\nnet/http: %#v\nferry:    %#v", row.name, got[r][0], got[r][1])
		}
	}
}

// TestSharedRetryWait: the wait before each retry is net/http's: none
// before the first, then 1, 2, 4, 8, 16, 32 units, lengthened by up to 10%
// and cut to whole units (so only the 16- and 32-unit waits vary).
func TestSharedRetryWait(t *testing.T) {
	const u = time.Second
	rows := []struct {
		retry  int
		jitter float64
		want   time.Duration
	}{
		{1, 0, 0},
		{1, 0.99, 0},
		{2, 0, 1 * u},
		{2, 0.99, 1 * u},
		{3, 0.5, 2 * u},
		{4, 0.99, 4 * u},
		{5, 0.99, 8 * u},
		{6, 0.6, 16 * u},
		{6, 0.7, 17 * u},
		{7, 0, 32 * u},
		{7, 0.4, 33 * u},
		{7, 0.99, 35 * u},
	}
	for _, row := range rows {
		if got := sharedRetryWait(row.retry, u, row.jitter); got != row.want {
			t.Errorf("retry %d, jitter %.2f: wait %v, want %v", row.retry, row.jitter, got, row.want)
		}
	}
	if got := sharedRetryWait(3, time.Millisecond, 0.5); got != 2*time.Millisecond {
		t.Errorf("with a millisecond unit the third wait is %v, want 2ms", got)
	}
}

var errTestPhaseCause = errors.New("test: caller's cause")

// h2HeadAndPart answers stream id with a 200 head and one DATA frame,
// leaving the body open.
func h2HeadAndPart(fr *http2.Framer, id uint32) error {
	var buf bytes.Buffer
	enc := hpack.NewEncoder(&buf)
	enc.WriteField(hpack.HeaderField{Name: ":status", Value: "200"})
	if err := fr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: buf.Bytes(), EndHeaders: true}); err != nil {
		return err
	}
	return fr.WriteData(id, false, []byte("part"))
}

// readToError reads body until it fails and returns the error.
func readToError(body io.Reader) error {
	buf := make([]byte, 64)
	for {
		if _, err := body.Read(buf); err != nil {
			return err
		}
	}
}

// TestH2CancelCauseByPhase: which error a caller gets when its context
// ends with a cause (WithCancelCause, WithTimeoutCause), by the phase the
// HTTP/2 request is in. net/http returns the cause while the request waits
// for its connection (before it starts, or dialling) and the context's
// own error (Canceled, DeadlineExceeded) once the request is with the
// HTTP/2 client: waiting for the response head, reading the body, and
// waiting between retries (where ferry returned the cause before).
func TestH2CancelCauseByPhase(t *testing.T) {
	errResult := func(err error, s *testpeer.H2Server) []any {
		_, streams := s.Counts()
		return []any{h2ErrText(err), errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded),
			errors.Is(err, errTestPhaseCause), streams}
	}
	answer := func(conn, stream int, fr *http2.Framer, id uint32) error { return testpeer.H2OK(fr, id) }
	silent := func(conn, stream int, fr *http2.Framer, id uint32) error { return nil }
	headAndPart := func(conn, stream int, fr *http2.Framer, id uint32) error { return h2HeadAndPart(fr, id) }
	rows := []struct {
		name string
		run  func(t *testing.T, impl string) []any
	}{
		{"before-start/cancel-cause", func(t *testing.T, impl string) []any {
			s := testpeer.StartH2(t, testpeer.H2Script{OnHeaders: answer})
			ctx, cancel := context.WithCancelCause(context.Background())
			cancel(errTestPhaseCause)
			_, err := implH2c(t, impl).RoundTrip(newReq(t, "GET", "http://"+s.Addr()+"/", nil).WithContext(ctx))
			return errResult(err, s)
		}},
		{"dial/cancel-cause", func(t *testing.T, impl string) []any {
			s := testpeer.StartH2(t, testpeer.H2Script{OnHeaders: answer})
			d := newHeldDialer(false, true)
			defer d.finish()
			rt := implClient(t, impl, &http.Transport{Protocols: protocolsOf("h2c"), DialContext: d.DialContext})
			ctx, cancel := context.WithCancelCause(context.Background())
			go func() { <-d.dialing; cancel(errTestPhaseCause) }()
			_, err := rt.RoundTrip(newReq(t, "GET", "http://"+s.Addr()+"/", nil).WithContext(ctx))
			return errResult(err, s)
		}},
		{"response-head/cancel-cause", func(t *testing.T, impl string) []any {
			arrived := make(chan struct{}, 1)
			s := testpeer.StartH2(t, testpeer.H2Script{OnHeaders: func(conn, stream int, fr *http2.Framer, id uint32) error {
				arrived <- struct{}{}
				return nil
			}})
			ctx, cancel := context.WithCancelCause(context.Background())
			go func() { <-arrived; cancel(errTestPhaseCause) }()
			_, err := implH2c(t, impl).RoundTrip(newReq(t, "GET", "http://"+s.Addr()+"/", nil).WithContext(ctx))
			return errResult(err, s)
		}},
		{"response-head/timeout-cause", func(t *testing.T, impl string) []any {
			s := testpeer.StartH2(t, testpeer.H2Script{OnHeaders: silent})
			ctx, cancel := context.WithTimeoutCause(context.Background(), 300*time.Millisecond, errTestPhaseCause)
			defer cancel()
			_, err := implH2c(t, impl).RoundTrip(newReq(t, "GET", "http://"+s.Addr()+"/", nil).WithContext(ctx))
			return errResult(err, s)
		}},
		{"body/cancel-cause", func(t *testing.T, impl string) []any {
			s := testpeer.StartH2(t, testpeer.H2Script{OnHeaders: headAndPart})
			ctx, cancel := context.WithCancelCause(context.Background())
			resp, err := implH2c(t, impl).RoundTrip(newReq(t, "GET", "http://"+s.Addr()+"/", nil).WithContext(ctx))
			if err != nil {
				t.Fatalf("%s: %v", impl, err)
			}
			defer resp.Body.Close()
			if _, err := io.ReadFull(resp.Body, make([]byte, len("part"))); err != nil {
				t.Fatalf("%s: first part: %v", impl, err)
			}
			cancel(errTestPhaseCause)
			return errResult(readToError(resp.Body), s)
		}},
		{"body/timeout-cause", func(t *testing.T, impl string) []any {
			s := testpeer.StartH2(t, testpeer.H2Script{OnHeaders: headAndPart})
			ctx, cancel := context.WithTimeoutCause(context.Background(), 300*time.Millisecond, errTestPhaseCause)
			defer cancel()
			resp, err := implH2c(t, impl).RoundTrip(newReq(t, "GET", "http://"+s.Addr()+"/", nil).WithContext(ctx))
			if err != nil {
				t.Fatalf("%s: %v", impl, err)
			}
			defer resp.Body.Close()
			return errResult(readToError(resp.Body), s)
		}},
		// Refused three times, the context ends during the wait before
		// the fourth attempt (net/http: attempts at 0, 0 and 1 s, the next
		// at 3 s; the context ends at 2 s, a second from either). Ferry's
		// waits are hooked: the first ones end at once, the one before the
		// fourth attempt never, and the context ends while it waits.
		{"retry-backoff/timeout-cause", func(t *testing.T, impl string) []any {
			s := testpeer.StartH2(t, testpeer.H2Script{OnHeaders: refuseFirst(-1)})
			rt := implH2c(t, impl)
			ctx, cancel := context.WithTimeoutCause(context.Background(), 2*time.Second, errTestPhaseCause)
			defer cancel()
			if tr, ok := rt.(*Transport); ok {
				holdBackoff(tr, func() {
					select { // the timer ends the context
					case <-ctx.Done():
					case <-time.After(rowTimeout):
					}
				})
			}
			_, err := rt.RoundTrip(newReq(t, "GET", "http://"+s.Addr()+"/", nil).WithContext(ctx))
			return errResult(err, s)
		}},
		{"retry-backoff/cancel-cause", func(t *testing.T, impl string) []any {
			s := testpeer.StartH2(t, testpeer.H2Script{OnHeaders: refuseFirst(-1)})
			rt := implH2c(t, impl)
			ctx, cancel := context.WithCancelCause(context.Background())
			defer cancel(nil)
			if tr, ok := rt.(*Transport); ok {
				holdBackoff(tr, func() { cancel(errTestPhaseCause) })
			} else {
				stop := time.AfterFunc(2*time.Second, func() { cancel(errTestPhaseCause) })
				defer stop.Stop()
			}
			_, err := rt.RoundTrip(newReq(t, "GET", "http://"+s.Addr()+"/", nil).WithContext(ctx))
			return errResult(err, s)
		}},
	}
	for _, row := range rows {
		t.Run(row.name, func(t *testing.T) { compareImpls(t, row.run) })
	}
}

// holdBackoff hooks tr's waits between HTTP/2 retries (the first retry
// does not wait): the wait before the second retry ends at once; the wait
// before the third retry (the fourth attempt) never ends by itself, and
// endCtx, which must end the request's context, runs when it begins.
func holdBackoff(tr *Transport, endCtx func()) {
	const heldRetry = 3
	var mu sync.Mutex // guards retry
	retry := 0
	tr.h2.backoffStarted = func(n int) {
		mu.Lock()
		retry = n
		mu.Unlock()
		if n == heldRetry {
			endCtx()
		}
	}
	tr.h2.backoffWait = func(time.Duration) <-chan time.Time {
		mu.Lock()
		defer mu.Unlock()
		if retry == heldRetry {
			return nil // never fires
		}
		ch := make(chan time.Time, 1)
		ch <- time.Time{}
		return ch
	}
}

// TestH2NewConnUnusableBeforeFirstStream: a server that negotiated HTTP/2
// and then closed the connection, sent something other than HTTP/2, or
// sent GOAWAY before the first request could take a stream. The request
// fails with net/http's error for that case, without another dial. (Which
// comes first, the connection's death or the first stream, is a race in
// both implementations; a hook holds ferry's first stream until the
// connection is unusable. net/http gives the same text in that order.)
func TestH2NewConnUnusableBeforeFirstStream(t *testing.T) {
	rows := []struct {
		name   string
		script func(c *rawConn)
	}{
		{name: "closed-after-preface", script: func(c *rawConn) {
			io.ReadFull(c.br, make([]byte, len(http2.ClientPreface)))
		}},
		{name: "http1-answer", script: func(c *rawConn) {
			io.ReadFull(c.br, make([]byte, len(http2.ClientPreface)))
			io.WriteString(c, "HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n")
		}},
		{name: "goaway", script: func(c *rawConn) {
			io.ReadFull(c.br, make([]byte, len(http2.ClientPreface)))
			fr := http2.NewFramer(c, c.br)
			fr.WriteSettings()
			fr.WriteGoAway(0, http2.ErrCodeEnhanceYourCalm, []byte("go away"))
			io.Copy(io.Discard, c.br) // open until the client closes
		}},
	}
	for _, row := range rows {
		t.Run(row.name, func(t *testing.T) {
			s := startRawServer(t, row.script)
			tr := h2cTransport()
			defer tr.CloseIdleConnections()
			tr.h2.beforeFirstStream = func(sc sharedConn) {
				deadline := time.Now().Add(rowTimeout)
				for sc.Usable() && time.Now().Before(deadline) {
					time.Sleep(time.Millisecond)
				}
			}
			body := &countingBody{Reader: strings.NewReader("payload")}
			req := newReq(t, "POST", s.URL+"/", nil)
			req.Body = body
			_, err := tr.RoundTrip(req)
			if got, want := h2ErrText(err), "http2: client conn could not be established"; got != want {
				t.Fatalf("err = %q, want %q", got, want)
			}
			if n := s.connCount(); n != 1 {
				t.Fatalf("%d connections, want 1 (no new dial)", n)
			}
			if n := body.closed.Load(); n != 1 {
				t.Fatalf("request body closed %d times, want 1", n)
			}
		})
	}
}
