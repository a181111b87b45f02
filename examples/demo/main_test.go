package main

import (
	"bytes"
	"strings"
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// TestRun runs the whole demo over loopback and checks that every request it
// reports succeeded with the protocol its client asked for.
func TestRun(t *testing.T) {
	var out bytes.Buffer
	if err := run(2, &out); err != nil {
		t.Fatalf("demo failed: %v\n%s", err, out.String())
	}
	for _, want := range []string{"HTTP/1.1  200", "HTTP/2.0  200"} {
		if got := strings.Count(out.String(), want); got != 2 {
			t.Errorf("want 2 rows with %q, got %d:\n%s", want, got, out.String())
		}
	}
}
