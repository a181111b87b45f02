package h2conn

import (
	"errors"
	"io"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// readCountingBody counts the Reads and Closes that reach the caller's body.
type readCountingBody struct {
	r      io.Reader
	reads  atomic.Int32
	closes atomic.Int32
}

func (b *readCountingBody) Read(p []byte) (int, error) {
	b.reads.Add(1)
	return b.r.Read(p)
}

func (b *readCountingBody) Close() error { b.closes.Add(1); return nil }

// TestReplayBodyReadAndClose: the HTTP/2 replay wrapper holds a
// Close only while its body is unread (it may go out again), passes it
// through once a Read began (the connection closes the body to stop a blocked
// Read),
// never closes the caller's body twice, and never reads it after a held
// Close (such a Read fails at once instead of blocking on the caller).
func TestReplayBodyReadAndClose(t *testing.T) {
	read := func(b *ReplayBody) error {
		_, err := b.Read(make([]byte, 8))
		return err
	}
	cases := []struct {
		name string
		// steps runs on the wrapper; closesMid is the caller body's Close
		// count wanted after step closesAt (-1: not checked).
		steps      []func(b *ReplayBody) error
		closesAt   int
		closesMid  int32
		wantReads  int32
		wantCloses int32
		wantErrAt  int // the step whose error is ErrReplayBodyClosed (-1: none fails)
	}{
		{name: "read-then-close-passes-through",
			steps:    []func(*ReplayBody) error{read, (*ReplayBody).Close, func(b *ReplayBody) error { b.CloseBody(); return nil }},
			closesAt: 1, closesMid: 1, wantReads: 1, wantCloses: 1, wantErrAt: -1},
		{name: "read-then-close-then-settle",
			steps:    []func(*ReplayBody) error{read, (*ReplayBody).Close, func(b *ReplayBody) error { b.Settle(); return nil }, (*ReplayBody).Close},
			closesAt: 1, closesMid: 1, wantReads: 1, wantCloses: 1, wantErrAt: -1},
		{name: "close-held-then-read-fails",
			steps:    []func(*ReplayBody) error{(*ReplayBody).Close, read, func(b *ReplayBody) error { b.Settle(); return nil }},
			closesAt: 1, closesMid: 0, wantReads: 0, wantCloses: 1, wantErrAt: 1},
		{name: "close-held-then-read-then-closeBody",
			steps:    []func(*ReplayBody) error{(*ReplayBody).Close, read, func(b *ReplayBody) error { b.CloseBody(); return nil }},
			closesAt: 1, closesMid: 0, wantReads: 0, wantCloses: 1, wantErrAt: 1},
		{name: "settled-read-close-read",
			steps:    []func(*ReplayBody) error{func(b *ReplayBody) error { b.Settle(); return nil }, read, (*ReplayBody).Close, read},
			closesAt: 2, closesMid: 1, wantReads: 1, wantCloses: 1, wantErrAt: 3},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cb := &readCountingBody{r: strings.NewReader("hello")}
			b := NewReplayBody(cb)
			for i, step := range tc.steps {
				err := step(b)
				if i == tc.wantErrAt {
					if !errors.Is(err, ErrReplayBodyClosed) {
						t.Errorf("step %d: err %v, want %v", i, err, ErrReplayBodyClosed)
					}
				} else if err != nil {
					t.Errorf("step %d: err %v", i, err)
				}
				if i == tc.closesAt {
					if got := cb.closes.Load(); got != tc.closesMid {
						t.Errorf("after step %d: caller's body closed %d times, want %d", i, got, tc.closesMid)
					}
				}
			}
			if got := cb.reads.Load(); got != tc.wantReads {
				t.Errorf("caller's body read %d times, want %d", got, tc.wantReads)
			}
			if got := cb.closes.Load(); got != tc.wantCloses {
				t.Errorf("caller's body closed %d times, want %d", got, tc.wantCloses)
			}
		})
	}
}

// TestReplayBodyCloseUnblocksRead: a Close from another goroutine
// while a Read is blocked on the caller's body reaches the body at once
// (before the outcome is known) and so ends the Read, as the connection needs
// before its RoundTrip can return after a reset stream or a lost
// connection.
func TestReplayBodyCloseUnblocksRead(t *testing.T) {
	pr, pw := io.Pipe()
	defer pw.Close()
	in := make(chan struct{})
	body := &pipeInBody{PipeReader: pr, in: in}
	b := NewReplayBody(body)
	done := make(chan error, 1)
	go func() {
		_, err := b.Read(make([]byte, 8))
		done <- err
	}()
	<-in // the Read reached the caller's body (it blocks there: nothing is written)
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		if !errors.Is(err, io.ErrClosedPipe) {
			t.Fatalf("blocked Read ended with %v, want %v", err, io.ErrClosedPipe)
		}
	case <-time.After(10 * time.Second): // hang guard
		pr.Close() // let the Read go
		<-done
		t.Fatal("the Close was held: the Read stayed blocked on the caller's body")
	}
	b.Settle()
	b.CloseBody()
}

// pipeInBody is a pipe reader that reports when a Read reached it.
type pipeInBody struct {
	*io.PipeReader
	in   chan struct{}
	seen atomic.Bool
}

func (b *pipeInBody) Read(p []byte) (int, error) {
	if !b.seen.Swap(true) {
		close(b.in)
	}
	return b.PipeReader.Read(p)
}
