package transport

import (
	"io"
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/quic-go/quic-go"
	"github.com/quic-go/quic-go/http3"
)

// h3Closer is the client of one HTTP/3 close-count run: quic-go's own
// http3.Transport ("quicgo") straight to the HTTP/3 port, or ferry reaching
// it through an Alt-Svc alternative of a TCP origin (with a warm HTTP/3
// connection), and the URL to use.
func h3Closer(t *testing.T, impl string, h http.Handler) (http.RoundTripper, string) {
	port, _ := startH3(t, h, nil)
	if impl == "quicgo" {
		tr := &http3.Transport{TLSClientConfig: h3Cert(t).ClientConfig()}
		t.Cleanup(func() { tr.Close() })
		return tr, "https://127.0.0.1:" + strconv.Itoa(port) + "/"
	}
	u := startTLS(t, h)
	tr := newH3Transport(t, func(tr *Transport) { tr.h3.headStart = time.Minute })
	advertise(t, tr.altSvcCache(), u, altValue("", port))
	if resp, _ := fetch(t, tr, "GET", u+"/warm", nil); resp.Proto != "HTTP/3.0" {
		t.Fatalf("warm-up over %s, want HTTP/3.0", resp.Proto)
	}
	return tr, u + "/"
}

// resetStream resets the request's stream both ways with code.
func resetStream(w http.ResponseWriter, code http3.ErrCode) {
	str, err := w.(http3.HTTPStreamer).HTTPStream()
	if err != nil {
		panic(err)
	}
	str.CancelRead(quic.StreamErrorCode(code))
	str.CancelWrite(quic.StreamErrorCode(code))
}

// TestReqBodyClosedOnceH3: the caller's request body over HTTP/3 is closed as
// often as quic-go's own http3.Transport closes it, on success, an answer
// that did not wait for the body, a reset stream, a cancelled upload and a
// body whose Read fails; a request the server refused unprocessed is sent
// again over TCP by ferry (quic-go returns the error), each of its bodies
// closed once.
func TestReqBodyClosedOnceH3(t *testing.T) {
	warmOr := func(h http.HandlerFunc) http.HandlerFunc {
		return func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path == "/warm" {
				return
			}
			h(w, r)
		}
	}
	readAll := func(w http.ResponseWriter, r *http.Request) {
		if _, err := io.Copy(io.Discard, r.Body); err != nil {
			return
		}
		io.WriteString(w, "ok")
	}
	onlyTCP := func(h3 http.HandlerFunc) http.HandlerFunc {
		// the TCP origin of a retried request answers it
		return func(w http.ResponseWriter, r *http.Request) {
			if r.ProtoMajor < 3 {
				readAll(w, r)
				return
			}
			h3(w, r)
		}
	}
	type row struct {
		name            string
		handler         http.HandlerFunc
		body            func() *probeBody
		cl              int64
		getBody         bool
		cancelAfterRead bool
		countsOnly      bool   // the outcomes differ by design (ferry retries over TCP)
		refDiffers      string // why ferry's counts differ from quic-go's there
	}
	const twice = "quic-go's http3.Transport closes the body twice on an error (its body writer and RoundTripOpt); ferry once, as net/http"
	eof := func() *probeBody { return newProbeBody("hello", probeEOF) }
	pending := func() *probeBody { return newProbeBody("hello", probeBlock) }
	failing := func() *probeBody { return newProbeBody("hel", probeFail) }
	rows := []row{
		{name: "success/known-length", handler: readAll, body: eof, cl: 5},
		{name: "success/getbody", handler: readAll, body: eof, cl: 5, getBody: true},
		{name: "success/streamed", handler: readAll, body: eof, cl: -1},
		{name: "early-answer/upload-pending", handler: func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "early") }, body: func() *probeBody {
			b := pending()
			b.guardAfter = 3 * time.Second // what ends quic-go's upload
			return b
		}, cl: -1,
			refDiffers: "quic-go leaves the upload blocked on the caller's body after the response body was closed (until the caller closes it: here the hang guard); ferry closes it then, as net/http's HTTP/2 client does"},
		{name: "early-answer/whole-body", handler: func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "early") }, body: eof, cl: 5},
		{name: "reset/before-head/upload-pending", handler: func(w http.ResponseWriter, r *http.Request) {
			resetStream(w, http3.ErrCodeInternalError)
		}, body: pending, cl: -1, refDiffers: twice},
		{name: "reset/after-head/upload-pending", handler: func(w http.ResponseWriter, r *http.Request) {
			w.WriteHeader(200)
			w.(http.Flusher).Flush()
			resetStream(w, http3.ErrCodeInternalError)
		}, body: pending, cl: -1, refDiffers: twice},
		{name: "rejected/getbody", handler: onlyTCP(func(w http.ResponseWriter, r *http.Request) {
			resetStream(w, http3.ErrCodeRequestRejected)
		}), body: eof, cl: 5, getBody: true, countsOnly: true,
			refDiffers: "ferry sends a refused request again over TCP with a body from GetBody; quic-go returns the refusal (and closes its body twice)"},
		{name: "rejected/no-getbody", handler: onlyTCP(func(w http.ResponseWriter, r *http.Request) {
			resetStream(w, http3.ErrCodeRequestRejected)
		}), body: eof, cl: 5, countsOnly: true, refDiffers: twice},
		{name: "cancel/mid-upload-before-head", handler: readAll, body: pending, cl: -1, cancelAfterRead: true, refDiffers: twice},
		{name: "read-fails/streamed", handler: readAll, body: failing, cl: -1, refDiffers: twice},
		{name: "read-fails/known-length", handler: readAll, body: failing, cl: 5, refDiffers: twice},
		{name: "read-fails/getbody", handler: readAll, body: failing, cl: 5, getBody: true, refDiffers: twice},
	}
	for _, tc := range rows {
		t.Run(tc.name, func(t *testing.T) {
			l := compareCloses(t, [2]string{"quicgo", "ferry"}, tc.body, func(t *testing.T, impl string, l *probeLedger) string {
				rt, u := h3Closer(t, impl, warmOr(tc.handler))
				out := sendProbe(t, rt, u, l, tc.cl, tc.getBody, tc.cancelAfterRead)
				if tc.countsOnly {
					return "-"
				}
				return errorKindOnly(out)
			}, "", tc.refDiffers)
			closedOnceEach(t, l)
		})
	}
}
