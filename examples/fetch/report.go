package main

import (
	"fmt"
	"io"
	"net"
	"net/url"
	"slices"
	"sort"
	"strconv"
	"time"

	"github.com/ferryhttp/ferry/altsvc"
)

// printDetail prints one request's outcome and phase timings.
func printDetail(w io.Writer, method, url string, r result) {
	if r.err != nil {
		fmt.Fprintf(w, "%s %s: %v\n", method, url, r.err)
		return
	}
	fmt.Fprintf(w, "%s %s\n", method, url)
	fmt.Fprintf(w, "  status      %s\n", r.status)
	fmt.Fprintf(w, "  protocol    %s\n", r.proto)
	fmt.Fprintf(w, "  body        %d bytes\n", r.bytes)
	conn := "new"
	if r.reused {
		conn = "reused (no DNS, connect or TLS)"
	}
	fmt.Fprintf(w, "  connection  %s\n", conn)
	fmt.Fprintf(w, "  dns         %s\n", phase(r.phases.dns))
	fmt.Fprintf(w, "  connect     %s\n", phase(r.phases.connect))
	fmt.Fprintf(w, "  tls         %s\n", phase(r.phases.tls))
	fmt.Fprintf(w, "  first byte  %s\n", ms(r.phases.firstByte))
	fmt.Fprintf(w, "  total       %s\n", ms(r.latency))
}

// phase formats a phase that may not have happened.
func phase(d time.Duration) string {
	if d == 0 {
		return "-"
	}
	return ms(d)
}

func ms(d time.Duration) string {
	return strconv.FormatFloat(float64(d)/float64(time.Millisecond), 'f', 2, 64) + " ms"
}

// progressLine is the one-line view of request i of n.
func progressLine(i, n int, r result) string {
	width := len(strconv.Itoa(n))
	if r.err != nil {
		return fmt.Sprintf("[%*d/%d] error: %v", width, i, n, r.err)
	}
	return fmt.Sprintf("[%*d/%d] %s %s %9s", width, i, n, r.proto, r.status, ms(r.latency))
}

// printSummary prints the count, protocol mix and latency percentiles of
// the successful requests.
func printSummary(w io.Writer, rs []result) {
	var lat []time.Duration
	mix := map[string]int{}
	failed := 0
	for _, r := range rs {
		if r.err != nil {
			failed++
			continue
		}
		lat = append(lat, r.latency)
		mix[r.proto]++
	}
	fmt.Fprintf(w, "summary\n")
	fmt.Fprintf(w, "  requests    %d (%d failed)\n", len(rs), failed)
	protos := make([]string, 0, len(mix))
	for p := range mix {
		protos = append(protos, p)
	}
	sort.Strings(protos)
	for _, p := range protos {
		fmt.Fprintf(w, "  %-11s %d\n", p, mix[p])
	}
	if len(lat) == 0 {
		return
	}
	slices.Sort(lat)
	fmt.Fprintf(w, "  %-8s %-10s %-10s %-10s %-10s\n", "latency", "min", "median", "p90", "max")
	fmt.Fprintf(w, "  %-8s %-10s %-10s %-10s %-10s\n", "",
		ms(lat[0]), ms(percentile(lat, 50)), ms(percentile(lat, 90)), ms(lat[len(lat)-1]))
}

// percentile returns the p-th percentile of sorted (nearest rank).
func percentile(sorted []time.Duration, p int) time.Duration {
	rank := (p*len(sorted) + 99) / 100 // ceil(p/100 * n)
	if rank < 1 {
		rank = 1
	}
	return sorted[rank-1]
}

// printAltSvc prints what the Transport's Alt-Svc cache holds for the
// URL's origin (https only), or the header of the last response when the
// cache has nothing (a cleartext origin: RFC 7838 alternatives are for
// https).
func printAltSvc(w io.Writer, cache *altsvc.Cache, u *url.URL, last result) {
	if u.Scheme == "https" {
		if o, err := altsvc.ParseOrigin(u.String()); err == nil {
			alts := cache.Lookup(o, nil)
			for _, a := range alts {
				state := "usable"
				if !a.BrokenUntil().IsZero() && time.Now().Before(a.BrokenUntil()) {
					state = "broken until " + a.BrokenUntil().Format(time.TimeOnly)
				}
				fmt.Fprintf(w, "alt-svc learned: %s at %s, expires %s, %s\n", a.Protocol,
					net.JoinHostPort(a.Host, strconv.Itoa(int(a.Port))), a.Expires().Format(time.DateTime), state)
			}
			if len(alts) > 0 {
				return
			}
		}
	}
	if last.altSvc != "" {
		fmt.Fprintf(w, "alt-svc header: %s (not cached: alternatives are for https origins)\n", last.altSvc)
		return
	}
	fmt.Fprintln(w, "alt-svc: none advertised")
}
