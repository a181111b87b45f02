package main

import (
	"net/http"
	"strings"
	"testing"

	"go.uber.org/goleak"

	"github.com/ferryhttp/ferry/transport"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// TestDropin runs the whole program on a small site: every round must
// crawl every page (run checks it against the server's count), ferry's
// rounds must have gone through ferry, and the library code path must
// work after Install. The figures themselves are not asserted.
func TestDropin(t *testing.T) {
	var out strings.Builder
	if err := run(config{pages: 60, rounds: 4, workers: 2, out: &out}); err != nil {
		t.Fatalf("run: %v\n%s", err, out.String())
	}
	for _, w := range []string{
		"crawl 1  ferry        60 pages", "crawl 2  net/http     60 pages",
		"crawl 3  net/http     60 pages", "crawl 4  ferry        60 pages",
		"median   ferry", "requests ferry carried: 120 of 120",
		"http.DefaultTransport.(*http.Transport).Clone() still works: GET -> 200",
	} {
		if !strings.Contains(out.String(), w) {
			t.Errorf("output lacks %q:\n%s", w, out.String())
		}
	}
	// Everything is undone: the program leaves the globals as it found them.
	if http.DefaultClient.Transport != nil || transport.Installed() != nil {
		t.Fatalf("after run: DefaultClient.Transport %T, Installed %v", http.DefaultClient.Transport, transport.Installed())
	}
}

func TestDropinBadFlags(t *testing.T) {
	for _, cfg := range []config{{pages: 0, rounds: 2, workers: 1}, {pages: 5, rounds: 3, workers: 1}, {pages: 5, rounds: 2, workers: 0}} {
		if err := run(cfg); err == nil {
			t.Errorf("run(%+v) succeeded", cfg)
		}
	}
}
