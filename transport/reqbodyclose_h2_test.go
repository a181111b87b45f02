package transport

import (
	"bytes"
	"errors"
	"io"
	"net/http"
	"testing"

	"github.com/ferryhttp/ferry/internal/testpeer"
	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
)

// h2TLSClient is net/http.Transport over TLS with HTTP/2 forced, or ferry's
// From of the same configuration.
func h2TLSClient(t *testing.T, impl string) http.RoundTripper {
	return implClient(t, impl, &http.Transport{TLSClientConfig: h3Cert(t).ClientConfig(), ForceAttemptHTTP2: true})
}

// h2HeadersOnly answers stream id with status 200 and no END_STREAM: the
// response head, its body still to come.
func h2HeadersOnly(fr *http2.Framer, id uint32) error {
	var buf bytes.Buffer
	hpack.NewEncoder(&buf).WriteField(hpack.HeaderField{Name: ":status", Value: "200"})
	return fr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: buf.Bytes(), EndHeaders: true})
}

// TestReqBodyClosedOnceH2: the caller's request body over HTTP/2 is closed as
// often as net/http closes it (once per body object it produced: the first
// and each GetBody result), on success, an answer that did not wait for
// the body, a reset stream, GOAWAY (retried with GetBody, or not retried),
// a cancelled upload and a body whose Read fails.
func TestReqBodyClosedOnceH2(t *testing.T) {
	readAll := func(w http.ResponseWriter, r *http.Request) {
		if _, err := io.Copy(io.Discard, r.Body); err != nil {
			return
		}
		io.WriteString(w, "ok")
	}
	early := func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "early") }
	type row struct {
		name    string
		handler http.HandlerFunc                                          // TLS net/http server (h2)
		raw     func(conn, stream int, fr *http2.Framer, id uint32) error // raw h2c server instead
		body    func() *probeBody
		cl      int64
		getBody bool
		// cancel, when set, cancels the request once this reports true.
		cancelAfterRead bool // once the body's first Read happened
		refDiffers      string
		errKindOnly     bool // the error's text depends on timing (EOF or reset)
		cancelAfterResp bool // once the response head came (then read the body)
		skip            string
	}
	rows := []row{
		{name: "success/known-length", handler: readAll, body: func() *probeBody { return newProbeBody("hello", probeEOF) }, cl: 5},
		{name: "success/getbody", handler: readAll, body: func() *probeBody { return newProbeBody("hello", probeEOF) }, cl: 5, getBody: true},
		{name: "success/streamed", handler: readAll, body: func() *probeBody { return newProbeBody("hello", probeEOF) }, cl: -1},
		{name: "early-answer/upload-pending", handler: early, body: func() *probeBody { return newProbeBody("hello", probeBlock) }, cl: -1},
		{name: "early-answer/whole-body", handler: early, body: func() *probeBody { return newProbeBody("hello", probeEOF) }, cl: 5},
		{name: "rst-stream/before-head/upload-pending", raw: func(_, _ int, fr *http2.Framer, id uint32) error {
			return fr.WriteRSTStream(id, http2.ErrCodeInternal)
		}, body: func() *probeBody { return newProbeBody("hello", probeBlock) }, cl: -1},
		{name: "rst-stream/before-head/whole-body", raw: func(_, _ int, fr *http2.Framer, id uint32) error {
			return fr.WriteRSTStream(id, http2.ErrCodeInternal)
		}, body: func() *probeBody { return newProbeBody("hello", probeEOF) }, cl: 5},
		{name: "rst-stream/after-head/upload-pending", raw: func(_, _ int, fr *http2.Framer, id uint32) error {
			if err := h2HeadersOnly(fr, id); err != nil {
				return err
			}
			return fr.WriteRSTStream(id, http2.ErrCodeCancel)
		}, body: func() *probeBody { return newProbeBody("hello", probeBlock) }, cl: -1},
		{name: "conn-lost/upload-pending", raw: func(_, _ int, fr *http2.Framer, id uint32) error {
			return errDropConn // the server closes the connection
		}, body: func() *probeBody { return newProbeBody("hello", probeBlock) }, cl: -1, errKindOnly: true},
		{name: "goaway/getbody", raw: goAwayFirstConn, body: func() *probeBody { return newProbeBody("hello", probeEOF) }, cl: 5, getBody: true,
			// net/http's HTTP/2 client rewinds the body (GetBody), finds
			// no cached connection and hands the request back to
			// net/http's Transport, which rewinds it again from the
			// caller's first body: the middle body is never closed.
			refDiffers: "net/http calls GetBody twice and never closes the second body; ferry once, each body closed once"},
		{name: "goaway/no-getbody", raw: goAwayFirstConn, body: func() *probeBody { return newProbeBody("hello", probeEOF) }, cl: 5},
		{name: "refused-stream/getbody", raw: refuseFirstStream, body: func() *probeBody { return newProbeBody("hello", probeEOF) }, cl: 5, getBody: true},
		{name: "refused-stream/no-getbody", raw: refuseFirstStream, body: func() *probeBody { return newProbeBody("hello", probeEOF) }, cl: 5},
		{name: "cancel/mid-upload-before-head", handler: readAll, body: func() *probeBody { return newProbeBody("hello", probeBlock) }, cl: -1, cancelAfterRead: true},
		{name: "read-fails/streamed", handler: readAll, body: func() *probeBody { return newProbeBody("hel", probeFail) }, cl: -1},
		{name: "read-fails/known-length", handler: readAll, body: func() *probeBody { return newProbeBody("hel", probeFail) }, cl: 5},
		{name: "read-fails/getbody", handler: readAll, body: func() *probeBody { return newProbeBody("hel", probeFail) }, cl: 5, getBody: true},
	}
	for _, tc := range rows {
		t.Run(tc.name, func(t *testing.T) {
			l := compareCloses(t, [2]string{"nethttp", "ferry"}, tc.body, func(t *testing.T, impl string, l *probeLedger) string {
				var rt http.RoundTripper
				var u string
				if tc.raw != nil {
					s := testpeer.StartH2(t, testpeer.H2Script{OnHeaders: tc.raw})
					rt, u = implH2c(t, impl), "http://"+s.Addr()+"/"
				} else {
					rt, u = h2TLSClient(t, impl), startTLSProto(t, tc.handler, true)
				}
				out := sendProbe(t, rt, u, l, tc.cl, tc.getBody, tc.cancelAfterRead)
				if tc.errKindOnly {
					out = errorKindOnly(out)
				}
				return out
			}, tc.skip, tc.refDiffers)
			closedOnceEach(t, l)
		})
	}
}

// goAwayFirstConn sends GOAWAY naming no stream for the first connection's
// first request (not processed: retryable) and answers every other.
func goAwayFirstConn(conn, stream int, fr *http2.Framer, id uint32) error {
	if conn == 0 && stream == 0 {
		return fr.WriteGoAway(0, http2.ErrCodeNo, nil)
	}
	return testpeer.H2OK(fr, id)
}

// refuseFirstStream refuses the first connection's first request
// (REFUSED_STREAM: not processed, retryable) and answers every other.
func refuseFirstStream(conn, stream int, fr *http2.Framer, id uint32) error {
	if conn == 0 && stream == 0 {
		return fr.WriteRSTStream(id, http2.ErrCodeRefusedStream)
	}
	return testpeer.H2OK(fr, id)
}

// errDropConn ends a raw server's connection from its script.
var errDropConn = errors.New("test: drop the connection")
