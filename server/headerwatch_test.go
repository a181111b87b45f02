package server

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/quic-go/quic-go"
	"github.com/quic-go/quic-go/qlogwriter"
)

// countingTrace is a user quic.Config.Tracer trace that counts events.
type countingTrace struct{ events, producers, closed atomic.Int64 }

func (c *countingTrace) AddProducer() qlogwriter.Recorder {
	c.producers.Add(1)
	return countingRecorder{c}
}

type countingRecorder struct{ c *countingTrace }

func (r countingRecorder) RecordEvent(qlogwriter.Event) { r.c.events.Add(1) }
func (r countingRecorder) Close() error                 { r.c.closed.Add(1); return nil }

// TestHeaderWatchKeepsUserTracer checks that a Tracer set in QUICConfig
// still receives the connection's events when the header watch is
// installed, and that the watch still ends a silent request stream.
func TestHeaderWatchKeepsUserTracer(t *testing.T) {
	user := &countingTrace{}
	var traces atomic.Int64
	st := startTLS(t, &http.Server{Handler: echoProto, ReadHeaderTimeout: 500 * time.Millisecond}, func(s *Server) {
		s.QUICConfig = &quic.Config{Tracer: func(context.Context, bool, quic.ConnectionID) qlogwriter.Trace {
			traces.Add(1)
			return user
		}}
	})
	resp, body := get(t, newClient(t, h3), st.url("/"))
	if resp.StatusCode != http.StatusOK || body != string(h3) {
		t.Fatalf("status %d, body %q", resp.StatusCode, body)
	}
	if traces.Load() == 0 || user.producers.Load() == 0 || user.events.Load() == 0 {
		t.Fatalf("user tracer: %d traces, %d producers, %d events; want some of each",
			traces.Load(), user.producers.Load(), user.events.Load())
	}

	conn := dialRawH3(t, st)
	str, err := conn.OpenStream()
	if err != nil {
		t.Fatal(err)
	}
	str.Write(headersFramePrefix(100)) // the field section never follows
	errc := make(chan error, 1)
	go func() { _, err := io.Copy(io.Discard, str); errc <- err }()
	select {
	case err := <-errc:
		if err == nil {
			t.Fatal("the incomplete request was answered")
		}
	case <-time.After(10 * time.Second):
		t.Fatal("a silent request stream outlived ReadHeaderTimeout with a user tracer set")
	}
}

// BenchmarkH3RequestHeaderWatch measures what the header watch (the qlog
// events quic-go and http3 produce once a Tracer is set) costs an HTTP/3
// request end to end over loopback, client and server in this process: a
// GET and a 256 KiB POST, without and with ReadHeaderTimeout.
func BenchmarkH3RequestHeaderWatch(b *testing.B) {
	sink := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		w.WriteHeader(http.StatusNoContent)
	})
	payload := bytes.Repeat([]byte("x"), 256<<10)
	for _, watch := range []struct {
		name    string
		timeout time.Duration
	}{{"no_header_timeout", 0}, {"header_timeout", 10 * time.Second}} {
		for _, size := range []int{0, len(payload)} {
			name := watch.name + "/get"
			if size > 0 {
				name = watch.name + "/post_256KiB"
			}
			b.Run(name, func(b *testing.B) {
				st := startTLS(b, &http.Server{Handler: sink, ReadHeaderTimeout: watch.timeout}, nil)
				c := newClient(b, h3)
				b.ReportAllocs()
				for b.Loop() {
					var resp *http.Response
					var err error
					if size == 0 {
						resp, err = c.Get(st.url("/"))
					} else {
						resp, err = c.Post(st.url("/"), "application/octet-stream", bytes.NewReader(payload[:size]))
					}
					if err != nil {
						b.Fatal(err)
					}
					io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
					if resp.StatusCode != http.StatusNoContent {
						b.Fatalf("status %d", resp.StatusCode)
					}
				}
			})
		}
	}
}
