package h3conn

import (
	"context"
	"errors"
	"io"
	"net/http"
	"sync"
	"testing"
	"time"
)

// exchangeOwner records what an Exchange tells its owner.
type exchangeOwner struct {
	mu      sync.Mutex // guards the fields below
	started int
	ended   int
	req     *http.Request
	cancel  context.CancelCauseFunc
}

func (o *exchangeOwner) ExchangeStarted(req *http.Request, cancel context.CancelCauseFunc) {
	o.mu.Lock()
	o.started++
	o.req, o.cancel = req, cancel
	o.mu.Unlock()
}

func (o *exchangeOwner) ExchangeEnded() {
	o.mu.Lock()
	o.ended++
	o.mu.Unlock()
}

func (o *exchangeOwner) counts() (started, ended int) {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.started, o.ended
}

var (
	errTestCanceled = errors.New("test: request canceled")
	errTestTimedOut = errors.New("test: timeout awaiting response headers")
)

// newExchange is an Exchange with the test's errors and owner.
func newExchange(o *exchangeOwner) *Exchange {
	return &Exchange{Canceled: errTestCanceled, TimedOut: errTestTimedOut, Owner: o}
}

// TestExchangeOwnerSeesStartAndEndOnce: the owner learns of the request
// (as the caller gave it) before it is sent, and of its end once, when
// the response body is read to its end and closed after; the response's
// Request is the caller's.
func TestExchangeOwnerSeesStartAndEndOnce(t *testing.T) {
	s := startH3(t, http.HandlerFunc(echoHandler), "localhost")
	c := dialTest(t, newTestDialer(t, s, nil), s)
	defer c.Close()
	o := &exchangeOwner{}
	req, _ := http.NewRequest("GET", "https://localhost/", nil)
	if !c.ReserveStream() {
		t.Fatal("no stream")
	}
	resp, err := newExchange(o).Send(c, req)
	if err != nil {
		t.Fatal(err)
	}
	if resp.Request != req || o.req != req {
		t.Fatal("the response or the owner got another request than the caller's")
	}
	if started, ended := o.counts(); started != 1 || ended != 0 {
		t.Fatalf("before the body's end: started %d, ended %d; want 1, 0", started, ended)
	}
	io.ReadAll(resp.Body)
	resp.Body.Close()
	if _, err := resp.Body.Read(make([]byte, 1)); err == nil {
		t.Fatal("Read after Close succeeded")
	}
	if started, ended := o.counts(); started != 1 || ended != 1 {
		t.Fatalf("after the body's end and Close: started %d, ended %d; want 1, 1", started, ended)
	}
}

// TestExchangeCancelReturnsCallersError: a request cancelled through the
// owner's cancel func (the transport's CancelRequest) or through
// Request.Cancel, while it waits for its response, fails with the
// Canceled error the exchange was given, and ends the exchange; one whose
// HeaderTimeout passes fails with TimedOut.
func TestExchangeCancelReturnsCallersError(t *testing.T) {
	release := make(chan struct{})
	defer close(release)
	s := startH3(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select { // no answer until the test ends or the request is reset
		case <-release:
		case <-r.Context().Done():
		}
	}), "localhost")
	c := dialTest(t, newTestDialer(t, s, nil), s)
	defer c.Close()
	for _, tc := range []struct {
		name    string
		prepare func(*Exchange, *http.Request, *exchangeOwner) *http.Request
		want    error
	}{
		{"owner-cancel", func(ex *Exchange, req *http.Request, o *exchangeOwner) *http.Request {
			go func() {
				for {
					o.mu.Lock()
					cancel := o.cancel
					o.mu.Unlock()
					if cancel != nil {
						time.Sleep(20 * time.Millisecond) // let the request go out
						cancel(errTestCanceled)
						return
					}
					time.Sleep(time.Millisecond)
				}
			}()
			return req
		}, errTestCanceled},
		{"request-cancel", func(ex *Exchange, req *http.Request, o *exchangeOwner) *http.Request {
			cancel := make(chan struct{})
			time.AfterFunc(20*time.Millisecond, func() { close(cancel) })
			req.Cancel = cancel
			return req
		}, errTestCanceled},
		{"header-timeout", func(ex *Exchange, req *http.Request, o *exchangeOwner) *http.Request {
			ex.HeaderTimeout = 20 * time.Millisecond
			return req
		}, errTestTimedOut},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := &exchangeOwner{}
			ex := newExchange(o)
			req, _ := http.NewRequest("GET", "https://localhost/", nil)
			req = tc.prepare(ex, req, o)
			if !c.ReserveStream() {
				t.Fatal("no stream")
			}
			resp, err := ex.Send(c, req)
			if err == nil {
				resp.Body.Close()
				t.Fatal("the request got an answer the server never sent")
			}
			if err != tc.want {
				t.Fatalf("err = %v, want %v", err, tc.want)
			}
			if started, ended := o.counts(); started != 1 || ended != 1 {
				t.Fatalf("started %d, ended %d; want 1, 1", started, ended)
			}
		})
	}
}
