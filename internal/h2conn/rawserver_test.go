package h2conn

import (
	"testing"

	"github.com/ferryhttp/ferry/internal/testpeer"
	"golang.org/x/net/http2"
)

// startRawServer starts a cleartext HTTP/2 server written with x/net's
// Framer that answers each request HEADERS with onHeaders, to produce the
// frames a real server rarely sends on demand (REFUSED_STREAM, GOAWAY
// naming an earlier stream).
func startRawServer(t testing.TB, onHeaders func(fr *http2.Framer, streamID uint32) error) *testpeer.H2Server {
	t.Helper()
	return testpeer.StartH2(t, testpeer.H2Script{
		OnHeaders: func(_, _ int, fr *http2.Framer, id uint32) error { return onHeaders(fr, id) },
	})
}

type http2Framer = http2.Framer

const (
	http2ErrCodeRefusedStream = http2.ErrCodeRefusedStream
	http2ErrCodeNo            = http2.ErrCodeNo
)
