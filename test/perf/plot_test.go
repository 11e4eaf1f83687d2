// Copyright 2026 The kyvap Authors.
// SPDX-License-Identifier: Apache-2.0

package perf

import (
	"fmt"
	"html"
	"math"
	"strings"
	"testing"
	"time"
)

// plotPoint is one column's latency at a concurrency.
type plotPoint struct {
	clients  int
	p50, p99 float64 // milliseconds
}

// plotSeries is one column of the admission table.
type plotSeries struct {
	name   string
	points []plotPoint
}

// plotColors tell the series apart (a colour-blind-safe palette).
var plotColors = []string{"#000000", "#0072b2", "#56b4e9", "#d55e00", "#009e73", "#cc79a7", "#e69f00", "#999999"}

// latencyPlot draws p99 (solid) and p50 (dashed) latency against the
// number of clients, both axes logarithmic, as a standalone SVG: the
// benchmark writes it beside its report, no plotting tool needed.
func latencyPlot(series []plotSeries) []byte {
	const width, height, left, right, top, bottom = 760.0, 440.0, 70.0, 220.0, 30.0, 50.0
	minX, maxX, minY, maxY := math.Inf(1), math.Inf(-1), math.Inf(1), math.Inf(-1)
	for _, s := range series {
		for _, p := range s.points {
			minX, maxX = math.Min(minX, float64(p.clients)), math.Max(maxX, float64(p.clients))
			for _, v := range []float64{p.p50, p.p99} {
				if v > 0 {
					minY, maxY = math.Min(minY, v), math.Max(maxY, v)
				}
			}
		}
	}
	if math.IsInf(minX, 1) || math.IsInf(minY, 1) {
		return []byte(`<svg xmlns="http://www.w3.org/2000/svg"/>`)
	}
	// Whole decades on the latency axis.
	loY, hiY := math.Floor(math.Log10(minY)), math.Ceil(math.Log10(maxY))
	if hiY == loY {
		hiY++
	}
	loX, hiX := math.Log10(minX), math.Log10(maxX)
	if hiX == loX {
		hiX++
	}
	x := func(clients int) float64 {
		return left + (math.Log10(float64(clients))-loX)/(hiX-loX)*(width-left-right)
	}
	y := func(ms float64) float64 {
		return height - bottom - (math.Log10(ms)-loY)/(hiY-loY)*(height-top-bottom)
	}
	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%.0f" height="%.0f" font-family="sans-serif" font-size="12">`+"\n", width, height)
	fmt.Fprintf(&b, `<rect width="100%%" height="100%%" fill="white"/>`+"\n")
	fmt.Fprintf(&b, `<text x="%.0f" y="18" font-size="14">Admission latency (ms, log) against concurrent clients: p99 solid, p50 dashed</text>`+"\n", left)
	for d := loY; d <= hiY; d++ {
		v := math.Pow(10, d)
		fmt.Fprintf(&b, `<line x1="%.1f" x2="%.1f" y1="%.1f" y2="%.1f" stroke="#dddddd"/>`+"\n", left, width-right, y(v), y(v))
		fmt.Fprintf(&b, `<text x="%.1f" y="%.1f" text-anchor="end">%g</text>`+"\n", left-6, y(v)+4, v)
	}
	seen := map[int]bool{}
	for _, s := range series {
		for _, p := range s.points {
			if !seen[p.clients] {
				seen[p.clients] = true
				fmt.Fprintf(&b, `<line x1="%.1f" x2="%.1f" y1="%.1f" y2="%.1f" stroke="#dddddd"/>`+"\n", x(p.clients), x(p.clients), top, height-bottom)
				fmt.Fprintf(&b, `<text x="%.1f" y="%.1f" text-anchor="middle">%d</text>`+"\n", x(p.clients), height-bottom+16, p.clients)
			}
		}
	}
	fmt.Fprintf(&b, `<text x="%.1f" y="%.1f" text-anchor="middle">clients</text>`+"\n", (left+width-right)/2, height-12)
	for i, s := range series {
		color := plotColors[i%len(plotColors)]
		for _, line := range []struct {
			dash  string
			value func(plotPoint) float64
		}{{"", func(p plotPoint) float64 { return p.p99 }}, {` stroke-dasharray="5,4"`, func(p plotPoint) float64 { return p.p50 }}} {
			var pts []string
			for _, p := range s.points {
				if v := line.value(p); v > 0 {
					pts = append(pts, fmt.Sprintf("%.1f,%.1f", x(p.clients), y(v)))
				}
			}
			fmt.Fprintf(&b, `<polyline fill="none" stroke="%s" stroke-width="2"%s points="%s"/>`+"\n", color, line.dash, strings.Join(pts, " "))
		}
		ly := top + 20 + float64(i)*18
		fmt.Fprintf(&b, `<line x1="%.1f" x2="%.1f" y1="%.1f" y2="%.1f" stroke="%s" stroke-width="2"/>`+"\n", width-right+12, width-right+36, ly-4, ly-4, color)
		fmt.Fprintf(&b, `<text x="%.1f" y="%.1f">%s</text>`+"\n", width-right+42, ly, html.EscapeString(s.name))
	}
	b.WriteString("</svg>\n")
	return []byte(b.String())
}

// TestLatencyPlot checks the plot's geometry: a series' points sit where
// their values say on the log axes, and an empty plot is still an SVG.
func TestLatencyPlot(t *testing.T) {
	svg := string(latencyPlot([]plotSeries{
		{name: "a<b", points: []plotPoint{{1, 1, 10}, {100, 10, 100}}},
	}))
	for _, want := range []string{
		// x: 1 client at the left edge (70), 100 at the right (760-220);
		// y: 100 ms at the top (30), 1 ms at the bottom (440-50).
		`points="70.0,210.0 540.0,30.0"`,                         // p99: 10 ms, 100 ms
		`stroke-dasharray="5,4" points="70.0,390.0 540.0,210.0"`, // p50: 1 ms, 10 ms
		">a&lt;b</text>",
	} {
		if !strings.Contains(svg, want) {
			t.Errorf("the plot lacks %q:\n%s", want, svg)
		}
	}
	if got := string(latencyPlot(nil)); !strings.HasPrefix(got, "<svg") {
		t.Errorf("empty plot: %q", got)
	}
}

// TestRoundsAccumulate: the quantiles of several rounds are those of all
// their requests together, whatever the rounds' order.
func TestRoundsAccumulate(t *testing.T) {
	ms := func(v ...int) []time.Duration {
		var out []time.Duration
		for _, x := range v {
			out = append(out, time.Duration(x)*time.Millisecond)
		}
		return out
	}
	acc := &mixResult{}
	acc.add(&mixResult{latencies: ms(5, 6, 7, 8, 9), duration: time.Second})
	acc.add(&mixResult{latencies: ms(0, 1, 2, 3, 4), duration: time.Second})
	if got := acc.quantile(0.5); got != 4 {
		t.Errorf("p50 = %v, want 4", got)
	}
	if got := acc.quantile(0.99); got != 8 {
		t.Errorf("p99 = %v, want 8 (index 8 of 10)", got)
	}
	if got := acc.perSecond(); got != 5 {
		t.Errorf("%v requests/s, want 5", got)
	}
}
