package main

import (
	"encoding/xml"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"go.uber.org/goleak"

	"github.com/ferryhttp/ferry/internal/selfsigned"
)

func TestMain(m *testing.M) {
	if isChild() { // re-executed by startChild: be the server
		if err := serveChild(); err != nil {
			os.Exit(1)
		}
		os.Exit(0)
	}
	goleak.VerifyTestMain(m)
}

// TestBench runs a short comparison end to end: the child server starts,
// every case is measured for both clients (each response checked inside
// measure), the table has every row, and the SVG is well-formed with a
// bar per case, client and figure.
func TestBench(t *testing.T) {
	svg := filepath.Join(t.TempDir(), "bench.svg")
	var out strings.Builder
	cfg := config{requests: 200, rounds: 2, parallel: 4, svg: svg, out: &out}
	if err := run(cfg); err != nil {
		t.Fatalf("run: %v\n%s", err, out.String())
	}
	o := out.String()
	for _, w := range []string{"h1 serial  ferry", "h1 x4      ferry", "h2 serial  ferry", "h2 x4      ferry", "net/http", "ratio", "chart written to"} {
		if !strings.Contains(o, w) {
			t.Errorf("output lacks %q:\n%s", w, o)
		}
	}
	if n := strings.Count(o, "ratio"); n != 4 {
		t.Errorf("%d ratio rows, want 4:\n%s", n, o)
	}
	data, err := os.ReadFile(svg)
	if err != nil {
		t.Fatal(err)
	}
	rects := 0
	d := xml.NewDecoder(strings.NewReader(string(data)))
	for {
		tok, err := d.Token()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("SVG is not well-formed XML: %v", err)
		}
		if se, ok := tok.(xml.StartElement); ok && se.Name.Local == "rect" {
			rects++
		}
	}
	// background + 2 legend swatches + 4 figures x 4 cases x 2 clients
	if want := 1 + 2 + 4*4*2; rects != want {
		t.Errorf("SVG has %d rects, want %d", rects, want)
	}
}

// TestMeasureChecksResponses: a response of the wrong protocol fails the
// measurement instead of being counted.
func TestMeasureChecksResponses(t *testing.T) {
	plain, _, stop, err := startChild(writeTestCert(t))
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	rt, closeIdle := newClient("net/http", nil, 1)
	defer closeIdle()
	if _, err := measure(rt, "http://"+plain+"/", 10, 1, 2); err == nil || !strings.Contains(err.Error(), "protocol") {
		t.Fatalf("HTTP/1.1 responses accepted as HTTP/2: %v", err)
	}
	if s, err := measure(rt, "http://"+plain+"/", 10, 2, 1); err != nil || s.ns <= 0 {
		t.Fatalf("measure: %+v, %v", s, err)
	}
}

// writeTestCert writes a fresh certificate and key for the child server.
func writeTestCert(t *testing.T) (string, string) {
	cert, err := selfsigned.New()
	if err != nil {
		t.Fatal(err)
	}
	c, k, err := cert.WriteFiles(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	return c, k
}
