package transport

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"

	"github.com/ferryhttp/ferry/internal/testpeer"
)

// "Expect: 100-continue" with ExpectContinueTimeout over HTTP/1.1 and
// HTTP/2, side by side with net/http: what the server saw, in order, what
// the caller got, how many connections served, and how often the caller's
// body was closed. The servers are scripted (a raw TCP script for HTTP/1.1,
// a frame server for h2c) because net/http's server sends 100 Continue on
// its own as soon as a handler reads the body.

// expectMode is how the scripted server treats a request that expects
// 100 Continue.
type expectMode int

const (
	// expectSend100: 100 Continue, then read the body, then 200 "got:BODY".
	expectSend100 expectMode = iota
	// expectWaitBody: no 100; read the body, then 200 "got:BODY" (the
	// client must send it when ExpectContinueTimeout ends, or at once
	// with no timeout).
	expectWaitBody
	// expectFinalKeep: 417 at once (connection kept); then log what comes.
	expectFinalKeep
	// expectFinalClose: 417 with Connection: close at once (HTTP/1.1); then
	// log what comes until the client closes.
	expectFinalClose
)

// eventLog is a server's record of what it saw and did, in order on each
// connection (the order across connections is not compared: a client may
// close one connection after it began using another).
type eventLog struct {
	mu sync.Mutex // guards ev
	ev map[int][]string
}

func (l *eventLog) add(conn int, format string, args ...any) {
	l.mu.Lock()
	if l.ev == nil {
		l.ev = map[int][]string{}
	}
	l.ev[conn] = append(l.ev[conn], fmt.Sprintf(format, args...))
	l.mu.Unlock()
}

func (l *eventLog) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var s []string
	for n := 0; n < len(l.ev); n++ {
		s = append(s, fmt.Sprintf("conn %d [%s]", n, strings.Join(l.ev[n], ", ")))
	}
	return strings.Join(s, " ")
}

// expectH1Script serves every request of a connection by mode, logging
// to l; requests without Expect are answered 200 "plain".
func expectH1Script(mode expectMode, l *eventLog) func(c *rawConn) {
	return func(c *rawConn) {
		c.SetDeadline(time.Now().Add(20 * time.Second)) // hang guard
		for {
			req, err := http.ReadRequest(c.br)
			if err != nil {
				return
			}
			if req.Header.Get("Expect") == "" {
				io.Copy(io.Discard, req.Body)
				l.add(c.n, "%s", req.Method)
				io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nplain")
				continue
			}
			l.add(c.n, "head")
			switch mode {
			case expectSend100, expectWaitBody:
				if mode == expectSend100 {
					io.WriteString(c, "HTTP/1.1 100 Continue\r\n\r\n")
					l.add(c.n, "sent 100")
				}
				b, err := io.ReadAll(req.Body)
				l.add(c.n, "body %q err=%v", b, err != nil)
				fmt.Fprintf(c, "HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\ngot:%s", 4+len(b), b)
			case expectFinalKeep:
				io.WriteString(c, "HTTP/1.1 417 Expectation Failed\r\nContent-Length: 2\r\n\r\nno")
				l.add(c.n, "sent 417")
				b, err := io.ReadAll(req.Body)
				l.add(c.n, "body after 417 %q err=%v", b, err != nil)
			case expectFinalClose:
				io.WriteString(c, "HTTP/1.1 417 Expectation Failed\r\nConnection: close\r\nContent-Length: 2\r\n\r\nno")
				l.add(c.n, "sent 417 close")
				b, _ := io.ReadAll(c.br) // until the client closes
				l.add(c.n, "after 417 %q", b)
				return
			}
		}
	}
}

// h2Head writes a response head on stream id; end ends the stream.
func h2Head(fr *http2.Framer, id uint32, status string, end bool) error {
	var buf bytes.Buffer
	hpack.NewEncoder(&buf).WriteField(hpack.HeaderField{Name: ":status", Value: status})
	return fr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: buf.Bytes(), EndHeaders: true, EndStream: end})
}

// startExpectH2 is an h2c server (testpeer's frame server) that treats
// the requests expecting 100 Continue by mode (expectFinalClose is not an
// HTTP/2 mode) and answers the others 200 "plain", logging every request
// frame in order.
func startExpectH2(t *testing.T, mode expectMode, l *eventLog) string {
	type streamKey struct {
		conn int
		id   uint32
	}
	var mu sync.Mutex                // guards bodies
	bodies := map[streamKey][]byte{} // streams that asked for 100 Continue: their body so far
	expecting := func(k streamKey) bool {
		mu.Lock()
		defer mu.Unlock()
		_, ok := bodies[k]
		return ok
	}
	srv := testpeer.StartH2(t, testpeer.H2Script{
		OnRequest: func(n int, fr *http2.Framer, f *http2.MetaHeadersFrame) error {
			id := f.StreamID
			if f.PseudoValue("method") == "" {
				l.add(n, "trailers")
				return nil
			}
			if len(f.Fields) > 0 && !hasExpect(f) {
				l.add(n, "%s", f.PseudoValue("method"))
				if err := h2Head(fr, id, "200", false); err != nil {
					return err
				}
				return fr.WriteData(id, true, []byte("plain"))
			}
			l.add(n, "head end=%v", f.StreamEnded())
			mu.Lock()
			bodies[streamKey{n, id}] = []byte{}
			mu.Unlock()
			switch mode {
			case expectSend100:
				if err := h2Head(fr, id, "100", false); err != nil {
					return err
				}
				l.add(n, "sent 100")
			case expectFinalKeep:
				if err := h2Head(fr, id, "417", false); err != nil {
					return err
				}
				if err := fr.WriteData(id, true, []byte("no")); err != nil {
					return err
				}
				l.add(n, "sent 417")
			}
			return nil
		},
		OnData: func(n int, fr *http2.Framer, id uint32, data []byte, end bool) error {
			k := streamKey{n, id}
			mu.Lock()
			body, ok := bodies[k]
			if ok {
				body = append(body, data...)
				bodies[k] = body
			}
			mu.Unlock()
			if !ok {
				return nil
			}
			if len(data) > 0 {
				// Credit back what arrived, so a larger body is not stalled.
				if err := fr.WriteWindowUpdate(0, uint32(len(data))); err != nil {
					return err
				}
				if err := fr.WriteWindowUpdate(id, uint32(len(data))); err != nil {
					return err
				}
			}
			if !end {
				return nil
			}
			if mode == expectFinalKeep {
				l.add(n, "body after 417 %q", body)
				return nil
			}
			l.add(n, "body %q", body)
			if err := h2Head(fr, id, "200", false); err != nil {
				return err
			}
			return fr.WriteData(id, true, append([]byte("got:"), body...))
		},
		OnReset: func(n int, id uint32, code http2.ErrCode) {
			if expecting(streamKey{n, id}) {
				l.add(n, "rst %v", code)
			}
		},
	})
	return "http://" + srv.Addr() + "/"
}

func hasExpect(f *http2.MetaHeadersFrame) bool {
	for _, hf := range f.Fields {
		if hf.Name == "expect" {
			return true
		}
	}
	return false
}

// TestExpectContinueMatchesNetHTTP: "Expect: 100-continue" over HTTP/1.1 and HTTP/2 (h2c) with
// a body known in memory (GetBody) and a streamed one: (a) the server sends
// 100 and reads the body; (b) it never sends 100 and waits for the body
// (ExpectContinueTimeout 50 ms: the client sends it when the timeout ends);
// (c) it answers 417 at once, keeping the connection (HTTP/1.1: net/http
// sends the body after the answer so the connection can serve the next
// request; HTTP/2: the body is not sent, the stream is reset) or, HTTP/1.1
// only, closing it (the body is not sent); (d) ExpectContinueTimeout 0:
// the body goes at once. Over HTTP/2 a plain GET follows, to see whether
// the connection was kept. Compared with net/http: the server's events in
// order, the answers, the connections and the caller's body Close counts.
// Whether HTTP/1.1 keeps the connection, and (c) with a kept HTTP/1.1
// connection, are TestExpectContinueConnReuse's (continue_reuse_test.go).
func TestExpectContinueMatchesNetHTTP(t *testing.T) {
	type row struct {
		name    string
		mode    expectMode
		timeout time.Duration
	}
	rows := []row{
		{"send-100", expectSend100, time.Minute},
		{"no-100-timeout", expectWaitBody, 50 * time.Millisecond},
		{"final-keepalive", expectFinalKeep, time.Minute},
		{"final-close", expectFinalClose, time.Minute},
		{"timeout-zero", expectWaitBody, 0},
	}
	for _, proto := range []string{"h1", "h2c"} {
		for _, tc := range rows {
			if proto == "h2c" && tc.mode == expectFinalClose {
				continue // no Connection: close in HTTP/2
			}
			if proto == "h1" && tc.mode == expectFinalKeep {
				continue // TestExpectContinueConnReuse (a race in ferry)
			}
			for _, streamed := range []bool{false, true} {
				name := proto + "/" + tc.name + "/getbody"
				if streamed {
					name = proto + "/" + tc.name + "/streamed"
				}
				t.Run(name, func(t *testing.T) {
					// Whether HTTP/1.1 keeps the connection is
					// TestExpectContinueConnReuse's (a race in ferry).
					reuse := proto != "h1"
					compareCloses(t, [2]string{"nethttp", "ferry"}, continueBody, continueScenario(proto, tc.mode, tc.timeout, streamed, reuse), "", "")
				})
			}
		}
	}
}

func continueBody() *probeBody { return newProbeBody("hello", probeEOF) }

// continueScenario POSTs "hello" with Expect: 100-continue to a server of
// proto ("h1" or "h2c") scripted by mode and, if reuse, then GETs (to see
// whether the connection was kept), and describes the answers, the
// server's events and (HTTP/1.1, with reuse) its connections.
func continueScenario(proto string, mode expectMode, timeout time.Duration, streamed, reuse bool) closeScenario {
	return func(t *testing.T, impl string, l *probeLedger) string {
		var log eventLog
		std := &http.Transport{ExpectContinueTimeout: timeout}
		var u string
		var conns func() int
		if proto == "h1" {
			srv := startRawServer(t, expectH1Script(mode, &log))
			u, conns = srv.URL+"/", srv.connCount
		} else {
			std.Protocols = protocolsOf("h2c")
			u = startExpectH2(t, mode, &log)
		}
		rt := implClient(t, impl, std)
		req, err := http.NewRequest("POST", u, l.body())
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Expect", "100-continue")
		req.ContentLength = 5
		req.GetBody = l.getBody
		if streamed {
			req.ContentLength = -1
			req.GetBody = nil
		}
		resp, err := rt.RoundTrip(req)
		l.returned()
		s := outcomeOf(resp, err)
		if reuse {
			s += "; then " + outcomeOf(rt.RoundTrip(newReq(t, "GET", u, nil)))
		}
		closeIdle(rt)
		if mode == expectFinalClose {
			// The server logs what came after its answer once the client
			// closed the connection.
			waitFor(t, func() bool { return strings.Contains(log.String(), "after 417") })
		}
		s += fmt.Sprintf("; server: %s", &log)
		if conns != nil && reuse {
			s += fmt.Sprintf("; conns %d", conns())
		}
		return s
	}
}
