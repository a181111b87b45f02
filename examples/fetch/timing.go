package main

import (
	"context"
	"crypto/tls"
	"io"
	"net/http"
	"net/http/httptrace"
	"strings"
	"sync"
	"time"
)

// result is one request as fetch saw it.
type result struct {
	status   string
	proto    string
	bytes    int64
	altSvc   string // the response's Alt-Svc header
	phases   phases
	reused   bool // the request went out on a pooled connection
	latency  time.Duration
	err      error
	tlsProto string // ALPN the TLS handshake negotiated, if one ran
}

// phases are the durations httptrace reports; zero when a phase did not
// happen for this request (a pooled connection, an IP literal, HTTP/3
// whose QUIC handshake runs apart from any request).
type phases struct {
	dns, connect, tls, firstByte time.Duration
}

// fetchOnce sends one request and reads the whole body, timing the phases.
func fetchOnce(client *http.Client, method, url string, header http.Header, data string) result {
	var r result
	var dnsStart, connStart, tlsStart time.Time
	// mu guards connStart and r.phases.connect: Happy Eyeballs may race
	// two connects, whose hooks run on their own goroutines. The winner's
	// ConnectDone runs before the connection is used; a loser's may run
	// later, and then only reads.
	var mu sync.Mutex
	start := time.Now()
	trace := &httptrace.ClientTrace{
		DNSStart: func(httptrace.DNSStartInfo) { dnsStart = time.Now() },
		DNSDone: func(httptrace.DNSDoneInfo) {
			if !dnsStart.IsZero() {
				r.phases.dns = time.Since(dnsStart)
			}
		},
		ConnectStart: func(string, string) {
			mu.Lock()
			if connStart.IsZero() {
				connStart = time.Now()
			}
			mu.Unlock()
		},
		ConnectDone: func(_, _ string, err error) {
			mu.Lock()
			if err == nil && r.phases.connect == 0 {
				r.phases.connect = time.Since(connStart)
			}
			mu.Unlock()
		},
		TLSHandshakeStart: func() { tlsStart = time.Now() },
		TLSHandshakeDone: func(cs tls.ConnectionState, err error) {
			if err == nil {
				r.phases.tls = time.Since(tlsStart)
				r.tlsProto = cs.NegotiatedProtocol
			}
		},
		GotConn:              func(i httptrace.GotConnInfo) { r.reused = i.Reused },
		GotFirstResponseByte: func() { r.phases.firstByte = time.Since(start) },
	}
	var body io.Reader
	if data != "" {
		body = strings.NewReader(data)
	}
	req, err := http.NewRequestWithContext(httptrace.WithClientTrace(context.Background(), trace), method, url, body)
	if err != nil {
		r.err = err
		return r
	}
	for k, v := range header {
		req.Header[k] = v
	}
	resp, err := client.Do(req)
	if err != nil {
		r.err = err
		r.latency = time.Since(start)
		return r
	}
	r.bytes, r.err = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	r.latency = time.Since(start)
	r.status = resp.Status
	r.proto = resp.Proto
	r.altSvc = strings.Join(resp.Header.Values("Alt-Svc"), ", ")
	if r.phases.firstByte == 0 { // HTTP/3 fires no GotFirstResponseByte
		r.phases.firstByte = r.latency
	}
	return r
}
