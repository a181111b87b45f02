package transport

import (
	"encoding/json"
	"expvar"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os/exec"
	"strings"
	"sync/atomic"
	"testing"
)

var publishRuns atomic.Int64

// TestStatsVarPublished publishes a Transport's StatsVar, serves expvar's
// handler and reads the counters back from /debug/vars as a monitoring
// agent would.
func TestStatsVarPublished(t *testing.T) {
	skipWithoutCounting(t)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "ok")
	}))
	defer srv.Close()
	tr := &Transport{}
	defer tr.CloseIdleConnections()
	// expvar names are process-wide and cannot be unpublished: a fresh
	// name per run lets -count=N work.
	name := fmt.Sprintf("ferry_test_stats_%d", publishRuns.Add(1))
	expvar.Publish(name, tr.StatsVar())
	getN(t, tr, srv.URL, 3)

	vars := httptest.NewServer(expvar.Handler())
	defer vars.Close()
	resp, body := fetch(t, tr, "GET", vars.URL, nil)
	if resp.StatusCode != 200 {
		t.Fatalf("/debug/vars: status %d", resp.StatusCode)
	}
	var all map[string]json.RawMessage
	if err := json.Unmarshal([]byte(body), &all); err != nil {
		t.Fatalf("/debug/vars is not JSON: %v", err)
	}
	var st Stats
	if err := json.Unmarshal(all[name], &st); err != nil {
		t.Fatalf("published stats %s: %v", all[name], err)
	}
	// The fetch of /debug/vars itself is the fourth request, on a second
	// connection; the page was rendered while it was in flight, so it
	// shows the first three responses and both dials.
	if st.Requests.H1 != 3 || st.Conns.Dialled != 2 {
		t.Fatalf("published %+v %+v; want 3 responses, 2 dials", st.Requests, st.Conns)
	}
	if got := (StatsVar{}).String(); got != "null" {
		t.Fatalf("StatsVar of a nil Transport = %q, want null", got)
	}
}

// TestNoExpvarImport: importing the transport package must not register
// /debug/vars on http.DefaultServeMux, so it must not import expvar.
func TestNoExpvarImport(t *testing.T) {
	if testing.Short() {
		t.Skip("runs go list")
	}
	out, err := exec.Command("go", "list", "-deps", ".").Output()
	if err != nil {
		t.Skipf("go list: %v", err)
	}
	for _, p := range strings.Fields(string(out)) {
		if p == "expvar" || p == "net/http/pprof" {
			t.Fatalf("transport depends on %s, which registers handlers on http.DefaultServeMux", p)
		}
	}
}
