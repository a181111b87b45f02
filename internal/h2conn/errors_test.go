package h2conn

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/ferryhttp/ferry/internal/idlepool"
	"golang.org/x/net/http2"
)

// Conn is what the pool expects of a shared connection.
var (
	_ idlepool.SharedConn   = (*Conn)(nil)
	_ idlepool.IdleReporter = (*Conn)(nil)
	_ idlepool.IdleCloser   = (*Conn)(nil)
)

func TestClassify(t *testing.T) {
	for _, tc := range []struct {
		name       string
		err        error
		reason     Reason // 0: not retryable
		bodyUnread bool
	}{
		{"nil", nil, 0, false},
		{"unusable", errors.New(errTextUnusable), ReasonConnUnusable, true},
		{"goaway", errors.New(errTextGoAway), ReasonGoAway, false},
		{"refused_stream", http2.StreamError{StreamID: 3, Code: http2.ErrCodeRefusedStream}, ReasonRefusedStream, false},
		{"refused_stream_wrapped", fmt.Errorf("x: %w", http2.StreamError{StreamID: 3, Code: http2.ErrCodeRefusedStream}), ReasonRefusedStream, false},
		{"cancel_stream", http2.StreamError{StreamID: 3, Code: http2.ErrCodeCancel}, 0, false},
		{"goaway_with_error", http2.GoAwayError{LastStreamID: 1, ErrCode: http2.ErrCodeProtocol}, 0, false},
		{"context", context.Canceled, 0, false},
		{"other", errTest, 0, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := classify(tc.err)
			if IsRetryable(got) != (tc.reason != 0) {
				t.Fatalf("IsRetryable(%v) = %v", got, IsRetryable(got))
			}
			if tc.reason == 0 {
				if got != tc.err {
					t.Fatalf("non-retryable error changed: %v -> %v", tc.err, got)
				}
				return
			}
			var np *NotProcessedError
			if !errors.As(got, &np) || np.Reason != tc.reason || np.BodyUnread != tc.bodyUnread {
				t.Fatalf("got %#v", got)
			}
			if !errors.Is(got, tc.err) && got.(*NotProcessedError).Err != tc.err {
				t.Fatal("x/net error not kept")
			}
			if got.Error() == "" || np.Reason.String() == "unknown" {
				t.Fatal("empty message")
			}
		})
	}
	if IsRetryable(nil) {
		t.Fatal("nil is retryable")
	}
}
