package transport

import (
	"net/http"

	"golang.org/x/net/http/httpguts"
)

// Retry rules, as net/http: a request that failed on a reused connection
// before any response byte arrived is retried on another connection when it
// is replayable (no body, NoBody or GetBody; and GET, HEAD, OPTIONS, TRACE
// or an Idempotency-Key header), or when nothing at all was written and its
// body can be produced again. A fresh connection is never retried.

// shouldRetry decides for an error from an exchange on a connection that
// was reused (wasReused) or fresh.
func shouldRetry(wasReused bool, req *http.Request, err error) bool {
	if !wasReused {
		return false
	}
	if _, ok := err.(nothingWrittenError); ok {
		return outgoingLength(req) == 0 || req.GetBody != nil
	}
	if !isReplayable(req) {
		return false
	}
	_, ok := err.(readFromServerError)
	return ok
}

// isReplayable is net/http's Request.isReplayable.
func isReplayable(req *http.Request) bool {
	if req.Body == nil || req.Body == http.NoBody || req.GetBody != nil {
		switch req.Method {
		case "", "GET", "HEAD", "OPTIONS", "TRACE":
			return true
		}
		if _, ok := req.Header["Idempotency-Key"]; ok {
			return true
		}
		if _, ok := req.Header["X-Idempotency-Key"]; ok {
			return true
		}
	}
	return false
}

// outgoingLength is net/http's Request.outgoingLength: 0 without a body,
// -1 when unknown.
func outgoingLength(req *http.Request) int64 {
	if req.Body == nil || req.Body == http.NoBody {
		return 0
	}
	if req.ContentLength != 0 {
		return req.ContentLength
	}
	return -1
}

func expectsContinue(req *http.Request) bool {
	return httpguts.HeaderValuesContainsToken(req.Header["Expect"], "100-continue")
}

func wantsClose(req *http.Request) bool {
	return req.Close || httpguts.HeaderValuesContainsToken(req.Header["Connection"], "close")
}
