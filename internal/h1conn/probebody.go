package h1conn

import (
	"io"
	"net/http"
	"time"
)

// A request body of unknown length on a method that usually has none (a
// GET with a Body and ContentLength 0) is probed before its HTTP/1.1 head
// is written, as net/http probes it (transferWriter.probeRequestBody): a
// body found empty goes as no body at all, without the
// "Transfer-Encoding: chunked" that servers and proxies reject on a GET; a
// body that yields a byte is sent chunked, that byte as its own first
// chunk, as net/http sends it. The probe waits at most ProbeWait for the
// first Read, on a goroutine of its own; a body net/http knows to be in
// memory is probed without one.

// ProbeWait is how long a probe waits for the body's first Read, as
// net/http waits: after it the head goes out chunked and the byte, when it
// comes, is the first chunk.
const ProbeWait = 200 * time.Millisecond

// usuallyLacksBody lists the methods whose unknown-length body net/http
// probes.
func usuallyLacksBody(method string) bool {
	switch method {
	case "GET", "HEAD", "DELETE", "OPTIONS", "PROPFIND", "SEARCH":
		return true
	}
	return false
}

// probeUnknownLength probes o.Body (o.probe is set and o.Body is not nil)
// and adjusts o: an empty body is closed and replaced by http.NoBody, sent
// with no framing header; otherwise o.Body yields the probed byte (or
// error) first.
func (o *Outgoing) probeUnknownLength() {
	if r := inMemoryReader(o.Body); r != nil {
		if r.Len() == 0 {
			o.Body.Close()
			o.probedEmpty()
			return
		}
		pb := &probedBody{body: o.Body}
		pb.n, pb.err = r.Read(pb.b[:]) // in memory: never blocks
		o.Body = pb
		return
	}
	pb := &probedBody{body: o.Body, done: make(chan struct{})}
	go pb.probe()
	timer := time.NewTimer(ProbeWait)
	select {
	case <-pb.done:
		timer.Stop()
		pb.done = nil // the result is in pb: no one waits for it
		if pb.n == 0 && pb.err == io.EOF {
			o.Body.Close()
			o.probedEmpty()
			return
		}
	case <-timer.C:
		// Too slow: the head goes out chunked; the writer's first Read
		// waits for the probe's.
	}
	o.Body = pb
}

// probedEmpty frames o as a request without a body.
func (o *Outgoing) probedEmpty() {
	o.Body = http.NoBody
	o.Chunked = false
	o.ContentLength = 0
	o.SyncBody = true
}

// probedBody is a probed body: the probe's byte, or its error, then the
// rest of the body. Its Close never runs while the probe's Read may: a
// Close that comes before that Read returned is done when it returns.
type probedBody struct {
	body io.ReadCloser
	b    [1]byte
	n    int   // bytes in b not yet returned by Read (0 or 1)
	err  error // the probe's error, returned after b
	// done is closed by the probe goroutine once b, n and err are set; nil
	// when they were set before the body was handed on.
	done chan struct{}
}

func (pb *probedBody) probe() {
	pb.n, pb.err = pb.body.Read(pb.b[:])
	close(pb.done)
}

func (pb *probedBody) Read(p []byte) (int, error) {
	if pb.done != nil {
		<-pb.done
	}
	if pb.n > 0 {
		if len(p) == 0 {
			return 0, nil
		}
		p[0] = pb.b[0]
		pb.n = 0
		return 1, nil
	}
	if pb.err == io.EOF {
		return 0, io.EOF
	}
	if pb.err != nil {
		return 0, pb.err
	}
	return pb.body.Read(p)
}

func (pb *probedBody) Close() error {
	if done := pb.done; done != nil {
		select {
		case <-done:
		default:
			// The probe's Read has not returned: close the body once it
			// has, not under it.
			go func() {
				<-done
				pb.body.Close()
			}()
			return nil
		}
	}
	return pb.body.Close()
}
