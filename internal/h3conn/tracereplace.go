package h3conn

import (
	"context"
	"net/http/httptrace"
)

// replaceTrace returns ctx with the httptrace hooks trace in place of old,
// the hooks ctx holds (httptrace.ContextClientTrace). Unlike
// httptrace.WithClientTrace, which composes and calls the newer hooks
// first, the replacement decides the order itself: Exchange uses it to
// run the caller's Got100Continue before it lets the request body go. A nil
// old means ctx holds no hooks: trace is simply added.
func replaceTrace(ctx context.Context, old, trace *httptrace.ClientTrace) context.Context {
	if old == nil {
		return httptrace.WithClientTrace(ctx, trace)
	}
	return traceReplaced{Context: ctx, old: old, trace: trace}
}
