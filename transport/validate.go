package transport

import (
	"errors"
	"fmt"
	"net/http"

	"github.com/ferryhttp/ferry/internal/h1conn"
	"golang.org/x/net/http/httpguts"
)

// validateRequest rejects what net/http rejects before any dial, with the
// same messages and in the same order.
func validateRequest(req *http.Request) error {
	if req.URL == nil {
		return errors.New("http: nil Request.URL")
	}
	if req.Header == nil {
		return errors.New("http: nil Request.Header")
	}
	scheme := req.URL.Scheme
	isHTTP := scheme == "http" || scheme == "https"
	if isHTTP {
		if msg := invalidHeader(req.Header); msg != "" {
			return fmt.Errorf("net/http: invalid header %s", msg)
		}
		if msg := invalidHeader(req.Trailer); msg != "" {
			return fmt.Errorf("net/http: invalid trailer %s", msg)
		}
	}
	if !isHTTP {
		return fmt.Errorf("unsupported protocol scheme %q", scheme)
	}
	if req.Method != "" && !validMethod(req.Method) {
		return fmt.Errorf("net/http: invalid method %q", req.Method)
	}
	if req.URL.Host == "" {
		return errors.New("http: no Host in request URL")
	}
	return nil
}

func invalidHeader(h http.Header) string {
	if len(h) == 0 {
		return "" // starting an iteration, even over nothing, costs ~100 instructions
	}
	for k, vv := range h {
		if !httpguts.ValidHeaderFieldName(k) {
			return fmt.Sprintf("field name %q", k)
		}
		for _, v := range vv {
			if !httpguts.ValidHeaderFieldValue(v) {
				return fmt.Sprintf("field value for %q", k)
			}
		}
	}
	return ""
}

func validMethod(m string) bool {
	if m == "" {
		return false
	}
	for i := 0; i < len(m); i++ {
		if !h1conn.IsTokenByte(m[i]) {
			return false
		}
	}
	return true
}

// closeRequestBody closes req.Body if there is one.
func closeRequestBody(req *http.Request) {
	if req.Body != nil {
		req.Body.Close()
	}
}
