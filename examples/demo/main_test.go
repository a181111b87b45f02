package main

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// TestRun runs the whole demo over loopback and checks the story its table
// tells: ferry's first request goes over TCP and learns Alt-Svc, later ones
// switch to HTTP/3.0 and stay there; net/http stays on TCP throughout.
func TestRun(t *testing.T) {
	var out bytes.Buffer
	// A gap between requests, as in the demo, so that the table stays
	// short while the QUIC handshake completes on a loaded machine.
	if err := run(config{requests: 3, gap: 5 * time.Millisecond, out: &out}); err != nil {
		t.Fatalf("demo failed: %v\n%s", err, out.String())
	}
	var ferry, std []string // protocols per row, in order
	for _, line := range strings.Split(out.String(), "\n") {
		f := strings.Fields(line)
		if len(f) < 4 || f[3] != "200" {
			continue
		}
		switch f[0] {
		case "ferry":
			ferry = append(ferry, f[2])
		case "net/http":
			std = append(std, f[2])
		}
	}
	tcp := func(p string) bool { return p == "HTTP/1.1" || p == "HTTP/2.0" }
	if len(ferry) < 4 || !tcp(ferry[0]) {
		t.Fatalf("ferry rows %v: want a TCP request first, then HTTP/3\n%s", ferry, out.String())
	}
	switched := false
	h3 := 0
	for _, p := range ferry[1:] {
		switch {
		case p == "HTTP/3.0":
			switched = true
			h3++
		case switched || !tcp(p):
			t.Fatalf("ferry rows %v: once on HTTP/3 every request must stay there\n%s", ferry, out.String())
		}
	}
	if h3 != 3 {
		t.Fatalf("ferry made %d HTTP/3 requests, want 3\n%s", h3, out.String())
	}
	if len(std) != 3 {
		t.Fatalf("net/http rows %v, want 3\n%s", std, out.String())
	}
	for _, p := range std {
		if !tcp(p) {
			t.Fatalf("net/http row over %s; it does not speak HTTP/3\n%s", p, out.String())
		}
	}
	if !strings.Contains(out.String(), "switched to HTTP/3") || !strings.Contains(out.String(), `h3=":`) {
		t.Fatalf("the table does not show the switch or the Alt-Svc value\n%s", out.String())
	}
}
