package main

import (
	"bytes"
	"encoding/xml"
	"fmt"
	"math"

	"github.com/refalloc/refalloc/bench"
)

var chartColors = map[string]string{
	bench.RefallocShared: "#9ecae1",
	bench.GoHeap:         "#e6550d",
	bench.SyncPool:       "#fdae6b",
	bench.Modernc:        "#31a354",
	bench.GoSlab:         "#756bb1",
}

// chart draws, for every workload and thread count, one bar per allocator: its
// speed relative to refalloc-cache (median of the within-run ratios) on a
// log2 axis, growing up from 1 when faster and down when slower.
func (r *runner) chart() []byte {
	type bar struct {
		alloc string
		v     float64
	}
	type group struct {
		label string
		bars  []bar
	}
	var groups []group
	var allocs []string
	seen := map[string]bool{}
	if r.o.has("suite") {
		for _, w := range r.o.selectedWorkloads(r.o.workloads) {
			for _, t := range r.o.threadsFor(w) {
				g := group{label: fmt.Sprintf("%s T=%d", w.Name, t)}
				if w.SingleThreaded {
					g.label = w.Name
				}
				ref := key{"suite", w.Name, t, bench.RefallocCache, 0}
				for _, k := range r.o.kindsFor(w) {
					if k.Name == bench.RefallocCache {
						continue
					}
					s := spreadOf(r.pairs(key{"suite", w.Name, t, k.Name, 0}, ref, speed(w.HigherIsBetter)))
					if !s.ok() {
						continue
					}
					g.bars = append(g.bars, bar{k.Name, s.med})
					if !seen[k.Name] {
						seen[k.Name] = true
						allocs = append(allocs, k.Name)
					}
				}
				if len(g.bars) > 0 {
					groups = append(groups, g)
				}
			}
		}
	}

	const (
		barW, gap, left, top, plotH, labelH = 9, 16, 70, 60, 360, 150
		lo, hi                              = -4.0, 3.0 // log2 axis: 1/16 … 8
	)
	width := left + 120 // the last rotated labels run right
	for _, g := range groups {
		width += len(g.bars)*barW + gap
	}
	width = max(width, 700)
	height := top + plotH + labelH
	y := func(v float64) float64 {
		l := math.Log2(math.Max(math.Min(v, math.Exp2(hi)), math.Exp2(lo)))
		return top + plotH*(hi-l)/(hi-lo)
	}
	var b bytes.Buffer
	esc := func(s string) string {
		var e bytes.Buffer
		xml.EscapeText(&e, []byte(s))
		return e.String()
	}
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" font-family="sans-serif" font-size="11">`+"\n", width, height)
	fmt.Fprintf(&b, `<rect width="100%%" height="100%%" fill="white"/>`+"\n")
	fmt.Fprintf(&b, `<text x="%d" y="20" font-size="14">Speed relative to refalloc-cache (log scale; above the line: faster than refalloc-cache)</text>`+"\n", left)
	for e := lo; e <= hi; e++ {
		yy := y(math.Exp2(e))
		stroke := "#ddd"
		if e == 0 {
			stroke = "#000"
		}
		fmt.Fprintf(&b, `<line x1="%d" x2="%d" y1="%.1f" y2="%.1f" stroke="%s"/>`+"\n", left, width-110, yy, yy, stroke)
		label := fmt.Sprintf("%g×", math.Exp2(e))
		if e < 0 {
			label = fmt.Sprintf("1/%g×", math.Exp2(-e))
		}
		fmt.Fprintf(&b, `<text x="%d" y="%.1f" text-anchor="end">%s</text>`+"\n", left-6, yy+4, label)
	}
	x := left + gap/2
	for _, g := range groups {
		for _, br := range g.bars {
			y0, y1 := y(1), y(br.v)
			fmt.Fprintf(&b, `<rect x="%d" y="%.1f" width="%d" height="%.1f" fill="%s"><title>%s %s: %s×</title></rect>`+"\n",
				x, math.Min(y0, y1), barW-1, math.Max(math.Abs(y1-y0), 1), chartColors[br.alloc], esc(g.label), br.alloc, fmtVal(br.v))
			x += barW
		}
		lx := x - len(g.bars)*barW/2
		fmt.Fprintf(&b, `<text transform="translate(%d,%d) rotate(60)">%s</text>`+"\n", lx, top+plotH+8, esc(g.label))
		x += gap
	}
	for i, a := range allocs {
		lx := left + 150*i
		fmt.Fprintf(&b, `<rect x="%d" y="32" width="12" height="12" fill="%s"/><text x="%d" y="42">%s</text>`+"\n", lx, chartColors[a], lx+16, a)
	}
	b.WriteString("</svg>\n")
	return b.Bytes()
}
