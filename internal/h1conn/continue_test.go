package h1conn

import (
	"bufio"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptrace"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ferryhttp/ferry/internal/testpeer"
)

// continueRequest is a POST of "abc" that asks for 100 Continue.
func continueRequest(url string) *http.Request {
	req, _ := http.NewRequest("POST", url, strings.NewReader("abc"))
	req.Header.Set("Expect", "100-continue")
	return req
}

// TestContinueFinalAnswerSendsBodyOnlyIfConnectionStays: a final answer
// instead of 100 Continue means the body is not sent when the connection
// closes after it (an HTTP/1.0 answer without keep-alive) and is sent when
// it stays (HTTP/1.0 with keep-alive), to keep its framing in step.
// net/http is the control: the server counts the body bytes it got.
func TestContinueFinalAnswerSendsBodyOnlyIfConnectionStays(t *testing.T) {
	for _, tc := range []struct {
		name, answer string
		wantBody     int
	}{
		{"http10-closes", "HTTP/1.0 417 Expectation Failed\r\nContent-Length: 0\r\n\r\n", 0},
		{"http10-keep-alive", "HTTP/1.0 417 Expectation Failed\r\nConnection: keep-alive\r\nContent-Length: 0\r\n\r\n", 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			bodyBytes := make(chan int, 1)
			srv := testpeer.StartRaw(t, func(n int, c net.Conn) {
				br := bufio.NewReader(c)
				if _, err := http.ReadRequest(br); err != nil {
					return
				}
				io.WriteString(c, tc.answer)
				c.SetReadDeadline(time.Now().Add(10 * time.Second))
				got, _ := io.ReadFull(br, make([]byte, 3)) // the body, or EOF when the client closes
				bodyBytes <- got
			})
			url := "http://" + srv.Addr() + "/"
			run := func(rt func(*http.Request) (*http.Response, error)) int {
				resp, err := rt(continueRequest(url))
				if err != nil {
					t.Fatal(err)
				}
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if resp.StatusCode != http.StatusExpectationFailed {
					t.Fatalf("status %d, want 417", resp.StatusCode)
				}
				return <-bodyBytes
			}
			ctl := &http.Transport{ExpectContinueTimeout: time.Minute}
			defer ctl.CloseIdleConnections()
			want := run(ctl.RoundTrip)

			cfg := testConfig()
			cfg.ExpectContinueTimeout = time.Minute
			pc := dialTestConn(t, cfg, srv.Addr())
			defer pc.Close()
			got := run(pc.roundTrip)
			if got != want || got != tc.wantBody {
				t.Fatalf("server got %d body bytes from ferry, %d from net/http; want %d", got, want, tc.wantBody)
			}
			pc.mu.Lock()
			closes := pc.closes
			pc.mu.Unlock()
			if kept := pc.takeIdle(); kept != (tc.wantBody > 0) || kept == (closes > 0) {
				t.Fatalf("connection kept %v, closed %d times; want kept only when the body was sent", kept, closes)
			}
		})
	}
}

// countingBody counts the Reads of a request body.
type countingBody struct {
	io.Reader
	reads atomic.Int32
}

func (b *countingBody) Read(p []byte) (int, error) {
	b.reads.Add(1)
	return b.Reader.Read(p)
}

func (b *countingBody) Close() error { return nil }

// TestContinueHeadUnwrittenIsNothingWritten: when the head of a request
// that waits for 100 Continue cannot be written (the connection is gone),
// the request fails as one of which nothing was written, which a reused
// connection may retry elsewhere, with its body unread and WroteRequest
// told the error.
func TestContinueHeadUnwrittenIsNothingWritten(t *testing.T) {
	client, server := net.Pipe()
	server.Close()
	cfg := testConfig()
	cfg.ExpectContinueTimeout = time.Minute
	pc := newTestConn(cfg, client)
	defer pc.Close()
	body := &countingBody{Reader: strings.NewReader("abc")}
	req := continueRequest("http://continue.test/")
	req.Body = body
	var wroteErr error
	req = req.WithContext(httptrace.WithClientTrace(req.Context(), &httptrace.ClientTrace{
		WroteRequest: func(i httptrace.WroteRequestInfo) { wroteErr = i.Err },
	}))
	resp, err := pc.roundTrip(req)
	if err == nil {
		resp.Body.Close()
		t.Fatal("a request on a closed connection succeeded")
	}
	if _, ok := err.(nothingWrittenError); !ok || !errors.Is(err, io.ErrClosedPipe) {
		t.Fatalf("err = %#v; want nothing written, wrapping io.ErrClosedPipe", err)
	}
	if !Retryable(true, req, err) {
		t.Fatal("not retryable on a reused connection, though nothing was written and GetBody is set")
	}
	if n := body.reads.Load(); n != 0 {
		t.Fatalf("body read %d times; want unread", n)
	}
	if !errors.Is(wroteErr, io.ErrClosedPipe) {
		t.Fatalf("WroteRequest got %v, want the write error", wroteErr)
	}
}
