package main

import (
	"fmt"
	"html"
	"math"
	"strings"
)

// chartSVG draws the results as four bar-chart panels (one per figure),
// each with a group of two bars (ferry, net/http) per case, scaled to the
// panel's largest value and labelled with their values. Hand-written SVG:
// no dependency, opens in any browser and renders on GitHub.
func chartSVG(rs []result, cfg config) string {
	const (
		width, height  = 960, 600
		panelW, panelH = 450, 240
		top            = 70
		barW           = 34
	)
	colors := [2]string{"#1f77b4", "#b0b0b0"}
	metrics := []struct {
		title string
		value func(sample) float64
		unit  string
	}{
		{"wall time per request (ns, lower is better)", func(s sample) float64 { return s.ns }, "%.0f"},
		{"client CPU per request (ns, lower is better)", func(s sample) float64 { return s.cpuNs }, "%.0f"},
		{"allocations per request (lower is better)", func(s sample) float64 { return s.allocs }, "%.1f"},
		{"read/write syscalls per request", func(s sample) float64 { return s.rwSyscalls }, "%.2f"},
	}
	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" font-family="sans-serif" font-size="12">`+"\n",
		width, height, width, height)
	fmt.Fprintf(&b, `<rect width="%d" height="%d" fill="white"/>`+"\n", width, height)
	fmt.Fprintf(&b, `<text x="20" y="28" font-size="18" font-weight="bold">ferry vs net/http, loopback</text>`+"\n")
	fmt.Fprintf(&b, `<text x="20" y="48" fill="#555">medians of %d rounds x %d requests, alternating order; server in a child process</text>`+"\n",
		cfg.rounds, cfg.requests)
	for i, name := range clients {
		x := width - 220 + i*100
		fmt.Fprintf(&b, `<rect x="%d" y="18" width="14" height="14" fill="%s"/><text x="%d" y="30">%s</text>`+"\n",
			x, colors[i], x+20, html.EscapeString(name))
	}
	for m, metric := range metrics {
		px := 20 + (m%2)*(panelW+20)
		py := top + (m/2)*(panelH+20)
		fmt.Fprintf(&b, `<text x="%d" y="%d" font-weight="bold">%s</text>`+"\n", px, py+14, html.EscapeString(metric.title))
		base := py + panelH - 24 // bars stand on this line
		maxV := 0.0
		for _, r := range rs {
			for i := range clients {
				maxV = math.Max(maxV, metric.value(r.median[i]))
			}
		}
		if maxV == 0 {
			maxV = 1
		}
		barsH := float64(panelH - 70)
		groupW := panelW / max(len(rs), 1)
		fmt.Fprintf(&b, `<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="#333"/>`+"\n", px, base, px+panelW, base)
		for g, r := range rs {
			gx := px + g*groupW + (groupW-2*barW-4)/2
			for i := range clients {
				v := metric.value(r.median[i])
				h := v / maxV * barsH
				x := gx + i*(barW+4)
				fmt.Fprintf(&b, `<rect x="%d" y="%.1f" width="%d" height="%.1f" fill="%s"/>`+"\n", x, float64(base)-h, barW, h, colors[i])
				fmt.Fprintf(&b, `<text x="%d" y="%.1f" text-anchor="middle" font-size="10">%s</text>`+"\n",
					x+barW/2, float64(base)-h-3, fmt.Sprintf(metric.unit, v))
			}
			fmt.Fprintf(&b, `<text x="%d" y="%d" text-anchor="middle">%s</text>`+"\n",
				px+g*groupW+groupW/2, base+16, html.EscapeString(r.c.name))
		}
	}
	b.WriteString("</svg>\n")
	return b.String()
}
