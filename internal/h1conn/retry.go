package h1conn

import (
	"net/http"

	"golang.org/x/net/http/httpguts"
)

// Retry rules, as net/http: a request that failed on a reused connection
// before any response byte arrived is retried on another connection when it
// is replayable (no body, NoBody or GetBody; and GET, HEAD, OPTIONS, TRACE
// or an Idempotency-Key header), or when nothing at all was written and its
// body can be produced again. A fresh connection is never retried.

// Retryable decides for an error from an exchange on a connection that
// was reused (wasReused) or fresh; the transport sends the request again on
// another connection when it says so.
func Retryable(wasReused bool, req *http.Request, err error) bool {
	if !wasReused {
		return false
	}
	if _, ok := err.(nothingWrittenError); ok {
		return OutgoingLength(req) == 0 || req.GetBody != nil
	}
	if !IsReplayable(req) {
		return false
	}
	_, ok := err.(readFromServerError)
	return ok
}

// IsReplayable is net/http's Request.IsReplayable.
func IsReplayable(req *http.Request) bool {
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

// OutgoingLength is net/http's Request.OutgoingLength: 0 without a body,
// -1 when unknown.
func OutgoingLength(req *http.Request) int64 {
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
