package main

import (
	"encoding/csv"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"

	"github.com/refalloc/refalloc/bench"
)

// key names one series of measurements (one value per repetition).
type key struct {
	mode, workload string
	threads        int
	alloc          string
	ways           int
}

func keyOf(m Measurement) key { return key{m.Mode, m.Workload, m.Threads, m.Alloc, m.Ways} }

// byRep returns the successful measurements of k by repetition.
func (r *runner) byRep(k key) map[int]Measurement {
	out := map[int]Measurement{}
	for _, m := range r.results {
		if m.Err == "" && keyOf(m) == k {
			out[m.Rep] = m
		}
	}
	return out
}

func (r *runner) values(k key) []float64 {
	var v []float64
	for _, m := range r.byRep(k) {
		v = append(v, m.Value)
	}
	return v
}

// pairs applies f to the values of a and b measured in the same repetition:
// ratios are taken side by side, where the machine's phase is the same.
func (r *runner) pairs(a, b key, f func(x, y float64) float64) []float64 {
	return r.pairsOf(a, b, value, f)
}

// pairsOf is pairs on another figure of the measurements than their value.
func (r *runner) pairsOf(a, b key, field func(Measurement) float64, f func(x, y float64) float64) []float64 {
	ma, mb := r.byRep(a), r.byRep(b)
	var out []float64
	for rep, x := range ma {
		if y, ok := mb[rep]; ok && field(x) > 0 && field(y) > 0 {
			out = append(out, f(field(x), field(y)))
		}
	}
	return out
}

// The figures of a measurement that pairsOf and fieldOf take.
func value(m Measurement) float64   { return m.Value }
func sysCPU(m Measurement) float64  { return m.SysCPUS }
func userCPU(m Measurement) float64 { return m.UserCPUS }
func peakRSS(m Measurement) float64 { return float64(m.PeakRSS) }
func numGC(m Measurement) float64   { return float64(m.NumGC) }
func elapsed(m Measurement) float64 { return m.ElapsedS }

// ratio is x/y: "how many times y" (for times and sizes, < 1 is better).
func ratio(x, y float64) float64 { return x / y }

// fieldOf is the spread of one figure over k's repetitions.
func (r *runner) fieldOf(k key, field func(Measurement) float64) spread {
	var v []float64
	for _, m := range r.byRep(k) {
		v = append(v, field(m))
	}
	return spreadOf(v)
}

// speed turns two values of a workload's metric into "how many times faster
// x is than y": > 1 means x is better, whatever the metric's direction.
func speed(higher bool) func(x, y float64) float64 {
	if higher {
		return func(x, y float64) float64 { return x / y }
	}
	return func(x, y float64) float64 { return y / x }
}

type spread struct {
	med, min, max float64
	n             int
}

func spreadOf(v []float64) spread {
	if len(v) == 0 {
		return spread{med: math.NaN(), min: math.NaN(), max: math.NaN()}
	}
	s := slices.Sorted(slices.Values(v))
	med := s[len(s)/2]
	if len(s)%2 == 0 {
		med = (s[len(s)/2-1] + s[len(s)/2]) / 2
	}
	return spread{med: med, min: s[0], max: s[len(s)-1], n: len(s)}
}

func (s spread) ok() bool { return s.n > 0 }

func (s spread) String() string {
	if !s.ok() {
		return "n/a"
	}
	if s.n == 1 {
		return fmtVal(s.med)
	}
	return fmt.Sprintf("%s (%s–%s)", fmtVal(s.med), fmtVal(s.min), fmtVal(s.max))
}

func mean(v []float64) float64 {
	t := 0.0
	for _, x := range v {
		t += x
	}
	return t / float64(len(v))
}

// fmtVal prints three significant digits without exponents.
func fmtVal(v float64) string {
	a := math.Abs(v)
	switch {
	case math.IsNaN(v):
		return "n/a"
	case a >= 100:
		return strconv.FormatFloat(v, 'f', 0, 64)
	case a >= 10:
		return strconv.FormatFloat(v, 'f', 1, 64)
	case a >= 1:
		return strconv.FormatFloat(v, 'f', 2, 64)
	case a >= 0.01 || a == 0:
		return strconv.FormatFloat(v, 'f', 3, 64)
	}
	return strconv.FormatFloat(v, 'g', 3, 64)
}

func mib(b int64) string {
	if b < 0 {
		return "—"
	}
	return fmt.Sprintf("%.1f MiB", float64(b)/(1<<20))
}

// target is one PASS/MISS line.
type target struct {
	status string // PASS, MISS or SKIP
	what   string
}

func check(pass bool) string {
	if pass {
		return "PASS"
	}
	return "MISS"
}

func (r *runner) workload(name string) bench.Workload {
	for _, w := range bench.Workloads(r.o.params) {
		if w.Name == name {
			return w
		}
	}
	return bench.Workload{Name: name}
}

// cAnchorName maps a Go workload to bench/c's name for it, "" when C has none.
func cAnchorName(w string) string {
	switch {
	case strings.HasPrefix(w, "larson-"), w == "threadtest-64", w == "cache-thrash",
		w == "cache-scratch", w == "xmalloc-test-64", w == "pair-64-keep1", w == "pair-64-batch1000":
		return w
	}
	return ""
}

func (r *runner) writeReport(anchors anchorSet) {
	var targets []target
	if r.o.has("suite") {
		r.printf("\n## Throughput\n\n")
		r.printf("%s", "Cells: median (min–max) over the runs. \"speed vs cache\" is how many times faster than refalloc-cache "+
			"(> 1: faster), the median of the ratios taken within each run. GC columns: GC CPU seconds "+
			"(the runtime's estimate) and stop-the-world pause total per run, medians. \"other CPU\": CPU used by "+
			"other processes during the timed window, % of the machine, median (max).\n")
		for _, w := range r.o.selectedWorkloads(r.o.workloads) {
			r.suiteTable(w, anchors)
		}
	}
	if r.o.has("memory") {
		r.memoryTable()
	}
	if r.o.has("stats") {
		r.statsTable()
	}
	if r.o.has("sweep") {
		r.sweepTable()
	}
	targets = r.targets(anchors)
	r.printf("\n## Targets\n\n```\n")
	for _, t := range targets {
		r.printf("%s  %s\n", t.status, t.what)
	}
	r.printf("```\n")
	r.loadSummary()
}

func (r *runner) suiteTable(w bench.Workload, anchors anchorSet) {
	dir := "lower is better"
	if w.HigherIsBetter {
		dir = "higher is better"
	}
	r.printf("\n### %s — %s, %s\n\n%s.\n\n", w.Name, w.Metric, dir, w.About)
	r.printf("| T | allocator | %s | speed vs cache | GC CPU s | GC pauses ms | GCs | other CPU %% |\n", w.Metric)
	r.printf("|---|---|---|---|---|---|---|---|\n")
	for _, t := range r.o.threadsFor(w) {
		ref := key{"suite", w.Name, t, bench.RefallocCache, 0}
		for _, k := range r.o.kindsFor(w) {
			kk := key{"suite", w.Name, t, k.Name, 0}
			ms := r.byRep(kk)
			var gcCPU, gcPause, ngc, foreign []float64
			for _, m := range ms {
				gcCPU = append(gcCPU, m.GCCPUS)
				gcPause = append(gcPause, m.GCPauseS*1e3)
				ngc = append(ngc, float64(m.NumGC))
				foreign = append(foreign, m.ForeignPct)
			}
			ratio := "1"
			if k.Name != bench.RefallocCache {
				ratio = spreadOf(r.pairs(kk, ref, speed(w.HigherIsBetter))).String()
			}
			fs := spreadOf(foreign)
			r.printf("| %d | %s | %s | %s | %s | %s | %s | %s (%s) |\n", t, k.Name, spreadOf(r.values(kk)), ratio,
				fmtVal(spreadOf(gcCPU).med), fmtVal(spreadOf(gcPause).med), fmt.Sprintf("%.0f", spreadOf(ngc).med),
				fmtVal(fs.med), fmtVal(fs.max))
		}
	}
	if w.Resources {
		r.resourcesTable(w)
	}
	if strings.HasPrefix(w.Name, "cache-") && slices.Contains(r.o.threads, 1) {
		r.printf("\nSpeedup over one goroutine (time at T=1 / time at T, same run; ideal = T):\n\n")
		r.printf("| T | %s |\n|---|%s\n", strings.Join(kindNames(r.o.kindsFor(w)), " | "),
			strings.Repeat("---|", len(r.o.kindsFor(w))))
		for _, t := range r.o.threads {
			if t == 1 {
				continue
			}
			var cells []string
			for _, k := range r.o.kindsFor(w) {
				cells = append(cells, spreadOf(r.pairs(key{"suite", w.Name, 1, k.Name, 0},
					key{"suite", w.Name, t, k.Name, 0}, func(x, y float64) float64 { return x / y })).String())
			}
			r.printf("| %d | %s |\n", t, strings.Join(cells, " | "))
		}
	}
	if c := cAnchorName(w.Name); c != "" && anchors != nil {
		var lines []string
		for _, t := range r.o.threadsFor(w) {
			a, ok := anchors.best(c, t, w.Metric)
			if !ok {
				continue
			}
			v := spreadOf(r.values(key{"suite", w.Name, t, bench.RefallocCache, 0}))
			if !v.ok() {
				continue
			}
			lines = append(lines, fmt.Sprintf("T=%d: best C allocator %s %s %s; refalloc-cache %s %s = %s× its speed",
				t, a.alloc, fmtVal(a.value), w.Metric, fmtVal(v.med), w.Metric, fmtVal(speed(w.HigherIsBetter)(v.med, a.value))))
			if s, ok := anchors.best(c, t, "speedup-vs-T1"); ok && t > 1 {
				sp := spreadOf(r.pairs(key{"suite", w.Name, 1, bench.RefallocCache, 0},
					key{"suite", w.Name, t, bench.RefallocCache, 0}, func(x, y float64) float64 { return x / y }))
				lines = append(lines, fmt.Sprintf("T=%d speedup over T=1: best C %s %s; refalloc-cache %s", t, s.alloc, fmtVal(s.value), fmtVal(sp.med)))
			}
		}
		if len(lines) > 0 {
			r.printf("\nC anchors (%s, medians, measured at another time — compare loosely): %s.\n",
				filepath.Base(r.o.anchors), strings.Join(lines, "; "))
		}
	}
}

// resourcesTable gives the CPU time of the timed window split into user and
// system (kernel: page faults, madvise, mmap) and the peak RSS over the
// baseline, with ratios to the Go heap taken within each run.
func (r *runner) resourcesTable(w bench.Workload) {
	r.printf("\nCPU and memory of the timed window (getrusage of the child process; peak RSS: VmHWM over the RSS " +
		"before the workload). Ratios \"vs go-heap\": x / go-heap's, within each run (< 1: less).\n\n")
	r.printf("| T | allocator | wall s | user CPU s | system CPU s | system vs go-heap | peak RSS MiB | peak RSS vs go-heap | GCs |\n")
	r.printf("|---|---|---|---|---|---|---|---|---|\n")
	mibOf := func(m Measurement) float64 { return float64(m.PeakRSS) / (1 << 20) }
	for _, t := range r.o.threadsFor(w) {
		h := key{"suite", w.Name, t, bench.GoHeap, 0}
		for _, k := range r.o.kindsFor(w) {
			kk := key{"suite", w.Name, t, k.Name, 0}
			sv, rv := "1", "1"
			if k.Name != bench.GoHeap {
				sv = spreadOf(r.pairsOf(kk, h, sysCPU, ratio)).String()
				rv = spreadOf(r.pairsOf(kk, h, peakRSS, ratio)).String()
			}
			r.printf("| %d | %s | %s | %s | %s | %s | %s | %s | %s |\n", t, k.Name, r.fieldOf(kk, elapsed), r.fieldOf(kk, userCPU),
				r.fieldOf(kk, sysCPU), sv, r.fieldOf(kk, mibOf), rv, fmtVal(r.fieldOf(kk, numGC).med))
		}
	}
}

func kindNames(ks []bench.Kind) []string {
	var s []string
	for _, k := range ks {
		s = append(s, k.Name)
	}
	return s
}

// memRatio is peak RSS over the baseline, less the workload's own arrays, per
// byte of peak live objects.
func memRatio(m Measurement) float64 {
	if m.PeakLive <= 0 {
		return math.NaN()
	}
	return float64(m.PeakRSS-m.Harness) / float64(m.PeakLive)
}

// memGroup is one workload × allocator of the memory pass, over its runs.
type memGroup struct {
	workload string
	threads  int
	alloc    string
	ms       []Measurement // the successful runs
	failed   int
}

func (g memGroup) of(f func(Measurement) float64) spread {
	var v []float64
	for _, m := range g.ms {
		v = append(v, f(m))
	}
	return spreadOf(v)
}

// ratio is the spread of RSS/live over the runs.
func (g memGroup) ratio() spread { return g.of(memRatio) }

// memGroups gathers the memory measurements by workload, threads and
// allocator, in the order they first ran.
func (r *runner) memGroups() []memGroup {
	var gs []memGroup
	idx := map[key]int{}
	for _, m := range r.results {
		if m.Mode != "memory" {
			continue
		}
		k := keyOf(m)
		i, ok := idx[k]
		if !ok {
			i = len(gs)
			idx[k] = i
			gs = append(gs, memGroup{workload: m.Workload, threads: m.Threads, alloc: m.Alloc})
		}
		if m.Err != "" {
			gs[i].failed++
		} else {
			gs[i].ms = append(gs[i].ms, m)
		}
	}
	return gs
}

func (r *runner) memoryTable() {
	r.printf("\n## Memory\n\n")
	r.printf("One child process per measurement (%d run(s) each, interleaved; bytes are medians over them). peak live: the largest sum of cap() of live objects; peak RSS: VmHWM over the "+
		"process's RSS before the workload; harness: the workload's own slot arrays (slice headers), subtracted in "+
		"\"RSS/live\" = (peak RSS − harness) / peak live, median (min–max) over the runs. After free (every object freed and caches flushed) and after "+
		"Trim (refalloc, modernc: their Trim; then, for every allocator, runtime.GC + debug.FreeOSMemory): "+
		"Committed is refalloc's Stats.Committed, \"res.\" the resident pages of refalloc's reservation (smaps Rss "+
		"of its mapping), RSS the process's VmRSS over the baseline.\n\n", r.o.memRuns)
	r.printf("| workload | T | allocator | peak live | peak RSS | harness | RSS/live | after free: Committed / res. / RSS | after Trim: Committed / res. / RSS |\n")
	r.printf("|---|---|---|---|---|---|---|---|---|\n")
	for _, g := range r.memGroups() {
		if len(g.ms) == 0 {
			r.printf("| %s | %d | %s | failed | | | | | |\n", g.workload, g.threads, g.alloc)
			continue
		}
		b := func(f func(Measurement) int64) string {
			return mib(int64(g.of(func(m Measurement) float64 { return float64(f(m)) }).med))
		}
		ratio := g.ratio().String()
		if g.failed > 0 {
			ratio += fmt.Sprintf(" (%d failed)", g.failed)
		}
		r.printf("| %s | %d | %s | %s | %s | %s | %s | %s / %s / %s | %s / %s / %s |\n", g.workload, g.threads, g.alloc,
			b(func(m Measurement) int64 { return m.PeakLive }), b(func(m Measurement) int64 { return m.PeakRSS }),
			b(func(m Measurement) int64 { return m.Harness }), ratio,
			b(func(m Measurement) int64 { return m.FreeCommitted }), b(func(m Measurement) int64 { return m.FreeResRSS }),
			b(func(m Measurement) int64 { return m.FreeRSS }), b(func(m Measurement) int64 { return m.TrimCommitted }),
			b(func(m Measurement) int64 { return m.TrimResRSS }), b(func(m Measurement) int64 { return m.TrimRSS }))
	}
}

type statsSummary struct {
	on, off spread
	ratios  []float64
}

func (r *runner) statsSummary(g string) statsSummary {
	var s statsSummary
	byPair := map[int]map[bool]float64{}
	var on, off []float64
	for _, x := range r.stats {
		if x.Err != "" {
			continue
		}
		if byPair[x.Pair] == nil {
			byPair[x.Pair] = map[bool]float64{}
		}
		byPair[x.Pair][x.Stats] = x.NsMin[g]
		if x.Stats {
			on = append(on, x.NsMin[g])
		} else {
			off = append(off, x.NsMin[g])
		}
	}
	for _, p := range byPair {
		if p[true] > 0 && p[false] > 0 {
			s.ratios = append(s.ratios, p[true]/p[false])
		}
	}
	s.on, s.off = spreadOf(on), spreadOf(off)
	return s
}

func (r *runner) statsTable() {
	r.printf("\n## Statistics overhead\n\n")
	r.printf("cmd/statsbench built with and without `-tags refalloc_nostats`, run alternately (%d pairs, %d rounds a run; "+
		"a run's figure is its fastest round). Each iteration allocates 64 objects through a Cache and frees them "+
		"in order; ns per alloc+free pair. Ratio = on/off within a pair.\n\n", r.o.statsPairs, r.o.statsRounds)
	r.printf("| group | counters on, ns | off, ns | on/off mean | median (min–max) | pairs |\n|---|---|---|---|---|---|\n")
	for _, g := range statsGroups {
		s := r.statsSummary(g)
		m := math.NaN()
		if len(s.ratios) > 0 {
			m = mean(s.ratios)
		}
		r.printf("| %s | %s | %s | %.4f | %s | %d |\n", g, s.on, s.off, m, spread4(spreadOf(s.ratios)), len(s.ratios))
	}
	var f []float64
	for _, x := range r.stats {
		f = append(f, x.Foreign)
	}
	if len(f) > 0 {
		r.printf("\nOther processes during these runs: median %.0f%%, max %.0f%% of the CPUs.\n", spreadOf(f).med, spreadOf(f).max)
	}
}

func spread4(s spread) string {
	if !s.ok() {
		return "n/a"
	}
	return fmt.Sprintf("%.4f (%.4f–%.4f)", s.med, s.min, s.max)
}

func (r *runner) sweepTable() {
	for _, w := range sweepWorkloads {
		r.sweepTableOf(w)
	}
}

func (r *runner) sweepTableOf(w string) {
	r.printf("\n## Superblock-cache sweep (%s, refalloc-cache)\n\n", w)
	r.printf("Hit rate = 1 − SuperblockCacheMisses / frees of small objects, in the timed window. " +
		"\"vs 1 way\": throughput ratio to 1 way within each run.\n\n")
	r.printf("| T | ways | Mops/s | vs 1 way | hit rate | other CPU %% |\n|---|---|---|---|---|---|\n")
	for _, t := range r.o.sweepThreads {
		for _, ways := range r.o.sweepWays {
			k := key{"sweep", w, t, bench.RefallocCache, ways}
			var hit, foreign []float64
			for _, m := range r.byRep(k) {
				if m.SmallFrees > 0 {
					hit = append(hit, 1-float64(m.Misses)/float64(m.SmallFrees))
				}
				foreign = append(foreign, m.ForeignPct)
			}
			vs := spreadOf(r.pairs(k, key{"sweep", w, t, bench.RefallocCache, 1}, speed(true)))
			h := spreadOf(hit)
			hs := "n/a"
			if h.ok() {
				hs = fmt.Sprintf("%.4f (%.4f–%.4f)", h.med, h.min, h.max)
			}
			r.printf("| %d | %d | %s | %s | %s | %s |\n", t, ways, spreadOf(r.values(k)), vs, hs, fmtVal(spreadOf(foreign).med))
		}
	}
}

// tieTolerance: a peer less than this much faster than refalloc-cache (median
// of within-run ratios) is not "ahead"; workloads that barely touch the
// allocator (cache-thrash) otherwise flip on noise.
const tieTolerance = 0.03

// peersAhead compares the Go peers with k, refalloc allocator name's
// measurement of workload w at t threads (higherIsBetter: the metric's
// direction), by the median of within-run ratios: it reports whether one is
// ahead by more than tieTolerance, and says which (and which are within it).
func (r *runner) peersAhead(w string, t int, k key, name string, higherIsBetter bool) (bool, string) {
	var ahead, tied []string
	for _, peer := range []string{bench.GoHeap, bench.SyncPool, bench.Modernc} {
		v := spreadOf(r.pairs(key{"suite", w, t, peer, 0}, k, speed(higherIsBetter)))
		switch {
		case !v.ok():
		case v.med > 1+tieTolerance:
			ahead = append(ahead, fmt.Sprintf("%s %s×", peer, fmtVal(v.med)))
		case v.med > 1:
			tied = append(tied, fmt.Sprintf("%s %s×", peer, fmtVal(v.med)))
		}
	}
	msg := "no Go peer ahead of " + name
	if len(ahead) > 0 {
		msg = "ahead of " + name + ": " + strings.Join(ahead, ", ")
	}
	if len(tied) > 0 {
		msg += fmt.Sprintf(" (within %.0f%%, counted as a tie: %s)", 100*tieTolerance, strings.Join(tied, ", "))
	}
	return len(ahead) > 0, msg
}

// targets evaluates issue #5's targets on what was measured. Every ratio is
// the median of ratios taken within one run.
func (r *runner) targets(anchors anchorSet) []target {
	var out []target
	add := func(pass bool, format string, args ...any) {
		out = append(out, target{check(pass), fmt.Sprintf(format, args...)})
	}
	skip := func(format string, args ...any) {
		out = append(out, target{"SKIP", fmt.Sprintf(format, args...)})
	}
	suite := func(w string, t int, a string) key { return key{"suite", w, t, a, 0} }
	measured := func(k key) bool { return len(r.byRep(k)) > 0 }
	if r.o.has("suite") {
		ws := r.o.selectedWorkloads(r.o.workloads)
		for _, w := range ws {
			if !strings.HasPrefix(w.Name, "pair-") {
				continue
			}
			c := suite(w.Name, 1, bench.RefallocCache)
			if s := suite(w.Name, 1, bench.GoSlab); measured(s) {
				v := spreadOf(r.pairs(c, s, func(x, y float64) float64 { return x / y }))
				add(v.med <= 1.5, "%s: refalloc-cache takes %s× the time of go-slab (target ≤ 1.5×)", w.Name, v)
			}
			if h := suite(w.Name, 1, bench.GoHeap); measured(h) {
				v := spreadOf(r.pairs(h, c, func(x, y float64) float64 { return x / y }))
				add(v.med >= 4, "%s: refalloc-cache is %s× faster than make+GC (target ≥ 4×)", w.Name, v)
			}
		}
		for _, w := range ws {
			factor := 0.0
			switch {
			case strings.HasPrefix(w.Name, "larson-"):
				factor = 3
			case strings.HasPrefix(w.Name, "xmalloc-test-"):
				factor = 2
			default:
				continue
			}
			for _, t := range r.o.threadsFor(w) {
				h := suite(w.Name, t, bench.GoHeap)
				if !measured(h) {
					continue
				}
				v := spreadOf(r.pairs(suite(w.Name, t, bench.RefallocCache), h, speed(true)))
				add(v.med >= factor, "%s T=%d: refalloc-cache has %s× the Go heap's throughput (target ≥ %g×)", w.Name, t, v, factor)
			}
		}
		for _, w := range ws {
			for _, t := range r.o.threadsFor(w) {
				ahead, msg := r.peersAhead(w.Name, t, suite(w.Name, t, bench.RefallocCache), bench.RefallocCache, w.HigherIsBetter)
				add(!ahead, "%s T=%d: %s", w.Name, t, msg)
			}
		}
		out = append(out, r.frontTargets(ws)...)
		for _, w := range ws {
			if !strings.HasPrefix(w.Name, "cache-") {
				continue
			}
			one, two := suite(w.Name, 1, bench.RefallocCache), suite(w.Name, 2, bench.RefallocCache)
			if !measured(one) || !measured(two) {
				skip("%s: T=1 and T=2 not both measured", w.Name)
				continue
			}
			v := spreadOf(r.pairs(one, two, func(x, y float64) float64 { return x / y }))
			add(v.med >= 1.8, "%s: refalloc-cache with 2 goroutines is %s× as fast as with 1 (target ≥ 1.8×)", w.Name, v)
		}
		for _, w := range ws {
			if !strings.HasPrefix(w.Name, "larson-") {
				continue
			}
			for _, t := range r.o.threadsFor(w) {
				v := spreadOf(r.values(suite(w.Name, t, bench.RefallocCache)))
				mi, ok := anchors.get(w.Name, t, "Mops/s", "mimalloc")
				if !ok || !v.ok() {
					skip("%s T=%d: no mimalloc anchor", w.Name, t)
					continue
				}
				add(v.med >= mi/2, "%s T=%d: refalloc-cache %s Mops/s = %s× mimalloc's C %s Mops/s (target ≥ 0.5×)",
					w.Name, t, fmtVal(v.med), fmtVal(v.med/mi), fmtVal(mi))
			}
		}
	}
	if r.o.has("memory") {
		for _, g := range r.memGroups() {
			if g.alloc == bench.RefallocCache && len(g.ms) > 0 {
				v := g.ratio()
				add(v.med <= 1.25, "%s T=%d memory: refalloc-cache peak RSS %s / peak live %s = %s (target ≤ 1.25)",
					g.workload, g.threads, mib(int64(g.of(func(m Measurement) float64 { return float64(m.PeakRSS - m.Harness) }).med)),
					mib(int64(g.of(func(m Measurement) float64 { return float64(m.PeakLive) }).med)), v)
			}
		}
	}
	out = append(out, r.issue12Targets()...)
	if r.o.has("stats") {
		for _, g := range statsGroups {
			s := r.statsSummary(g)
			if len(s.ratios) == 0 {
				skip("stats overhead %s: not measured", g)
				continue
			}
			m := spreadOf(s.ratios)
			add(m.med <= 1.01, "stats overhead %s: on/off %.4f, median of %d pairs (mean %.4f, range %.4f–%.4f; target ≤ 1.01)",
				g, m.med, len(s.ratios), mean(s.ratios), m.min, m.max)
		}
	}
	if r.o.has("sweep") && slices.Contains(r.o.sweepWays, 1) && slices.Contains(r.o.sweepWays, 16) {
		for _, w := range sweepWorkloads {
			for _, t := range r.o.sweepThreads {
				v := spreadOf(r.pairs(key{"sweep", w, t, bench.RefallocCache, 16},
					key{"sweep", w, t, bench.RefallocCache, 1}, speed(true)))
				if !v.ok() {
					skip("sweep %s T=%d: not measured", w, t)
					continue
				}
				add(v.med >= 1.08, "sweep %s T=%d: 16 ways has %s× the throughput of 1 way (target ≥ 1.08×; the default is 128 since issue 12)", w, t, v)
			}
		}
	}
	return out
}

// frontTargets are issue #10's targets for the goroutine-safe path
// (refalloc-shared: the Allocator's own methods), every ratio the median of
// ratios taken within one run.
func (r *runner) frontTargets(ws []bench.Workload) []target {
	var out []target
	add := func(pass bool, format string, args ...any) {
		out = append(out, target{check(pass), fmt.Sprintf(format, args...)})
	}
	suite := func(w string, t int, a string) key { return key{"suite", w, t, a, 0} }
	measured := func(k key) bool { return len(r.byRep(k)) > 0 }
	shared := func(w string, t int) key { return suite(w, t, bench.RefallocShared) }
	for _, w := range ws {
		if !measured(shared(w.Name, 1)) && !measured(shared(w.Name, 2)) {
			continue
		}
		for _, t := range r.o.threadsFor(w) {
			sh, c := shared(w.Name, t), suite(w.Name, t, bench.RefallocCache)
			if !measured(sh) {
				continue
			}
			vs := spreadOf(r.pairs(sh, c, speed(w.HigherIsBetter))) // > 1: shared faster
			switch name := w.Name; {
			case name == "pair-16-keep1", name == "pair-64-keep1", name == "pair-256-keep1":
				v := spreadOf(r.pairs(sh, c, func(x, y float64) float64 { return x / y }))
				add(v.med <= 1.3, "%s: refalloc-shared takes %s× the time of refalloc-cache (target ≤ 1.3×)", name, v)
				if h := suite(name, t, bench.GoHeap); measured(h) {
					v := spreadOf(r.pairs(h, sh, func(x, y float64) float64 { return x / y }))
					add(v.med >= 2, "%s: refalloc-shared is %s× faster than make+GC (target ≥ 2×)", name, v)
				}
			case strings.HasPrefix(name, "larson-"):
				want := 0.95
				if t > 1 {
					want = 0.8
				}
				add(vs.med >= want, "%s T=%d: refalloc-shared has %s× refalloc-cache's throughput (target ≥ %g×)", name, t, vs, want)
			case name == "threadtest-64", name == "cache-thrash", name == "cache-scratch":
				add(vs.med >= 0.9, "%s T=%d: refalloc-shared is %s× as fast as refalloc-cache (target ≥ 0.9×)", name, t, vs)
			case strings.HasPrefix(name, "xmalloc-test-"):
				if h := suite(name, t, bench.GoHeap); measured(h) {
					v := spreadOf(r.pairs(sh, h, speed(true)))
					add(v.med >= 1.5, "%s T=%d: refalloc-shared has %s× the Go heap's throughput (target ≥ 1.5×)", name, t, v)
				}
			case strings.HasPrefix(name, "goroutines-") && name != "goroutines-2":
				if base := shared("goroutines-2", t); measured(base) {
					v := spreadOf(r.pairs(sh, base, func(x, y float64) float64 { return x / y }))
					add(v.med <= 1.1, "%s: refalloc-shared's cost per pair is %s× its cost with 2 goroutines (target ≤ 1.1×)", name, v)
				}
			}
			// The moonshot: no Go peer ahead of the Allocator's methods.
			ahead, msg := r.peersAhead(w.Name, t, sh, bench.RefallocShared, w.HigherIsBetter)
			add(!ahead, "moonshot %s T=%d: %s", w.Name, t, msg)
		}
	}
	return out
}

// issue12Big is the live-set size from which issue #12's tighter memory
// target applies.
const issue12Big = 100 << 20

// issue12Pair reports whether w is one of issue #12's pair loops: 16–256 B,
// keep-1 or batch-1000.
func issue12Pair(w string) bool {
	var size int
	var mode string
	if _, err := fmt.Sscanf(strings.ReplaceAll(w, "-", " "), "pair %d %s", &size, &mode); err != nil {
		return false
	}
	return size >= 16 && size <= 256 && (mode == "keep1" || mode == "batch1000")
}

// issue12Targets are issue #12's targets, every ratio the median of ratios
// taken within one run: on one goroutine the Cache ahead of every Go peer;
// memory close to what is live; the Arrow-like grow cycle's kernel time and
// peak RSS no worse than the Go heap's. Each line starts "issue 12:".
func (r *runner) issue12Targets() []target {
	var out []target
	add := func(pass bool, format string, args ...any) {
		out = append(out, target{check(pass), "issue 12: " + fmt.Sprintf(format, args...)})
	}
	skip := func(format string, args ...any) {
		out = append(out, target{"SKIP", "issue 12: " + fmt.Sprintf(format, args...)})
	}
	suite := func(w string, t int, a string) key { return key{"suite", w, t, a, 0} }
	measured := func(k key) bool { return len(r.byRep(k)) > 0 }
	if r.o.has("suite") {
		for _, w := range r.o.selectedWorkloads(r.o.workloads) {
			c := suite(w.Name, 1, bench.RefallocCache)
			if !measured(c) {
				continue
			}
			switch {
			case strings.HasPrefix(w.Name, "larson-"):
				for _, peer := range []string{bench.SyncPool, bench.Modernc} {
					p := suite(w.Name, 1, peer)
					if !measured(p) {
						skip("%s T=1: %s not measured", w.Name, peer)
						continue
					}
					v := spreadOf(r.pairs(c, p, speed(true)))
					add(v.med > 1, "%s T=1: refalloc-cache has %s× %s's throughput (target > 1×: ahead)", w.Name, v, peer)
				}
				if h := suite(w.Name, 1, bench.GoHeap); measured(h) {
					v := spreadOf(r.pairs(c, h, speed(true)))
					add(v.med >= 3, "%s T=1: refalloc-cache has %s× the Go heap's throughput (target ≥ 3×)", w.Name, v)
				} else {
					skip("%s T=1: go-heap not measured", w.Name)
				}
			case issue12Pair(w.Name):
				if s := suite(w.Name, 1, bench.GoSlab); measured(s) {
					v := spreadOf(r.pairs(c, s, ratio))
					add(v.med <= 1.5, "%s: refalloc-cache takes %s× the time of go-slab (target ≤ 1.5×)", w.Name, v)
				} else {
					skip("%s: go-slab not measured", w.Name)
				}
				ahead, msg := r.peersAhead(w.Name, 1, c, bench.RefallocCache, false)
				add(!ahead, "%s: %s", w.Name, msg)
				if h := suite(w.Name, 1, bench.GoHeap); measured(h) {
					v := spreadOf(r.pairs(h, c, ratio))
					add(v.med >= 3, "%s: refalloc-cache is %s× faster than make+GC (target ≥ 3×)", w.Name, v)
				} else {
					skip("%s: go-heap not measured", w.Name)
				}
			case w.Name == "grow-cycle":
				h := suite(w.Name, 1, bench.GoHeap)
				if !measured(h) {
					skip("%s: go-heap not measured", w.Name)
					continue
				}
				for _, a := range []string{bench.RefallocCache, bench.RefallocShared} {
					k := suite(w.Name, 1, a)
					if !measured(k) {
						continue
					}
					if v := spreadOf(r.pairsOf(k, h, sysCPU, ratio)); v.ok() {
						add(v.med <= 1.1, "%s: %s's system CPU time is %s× the Go heap's (%s s against %s s; target ≤ 1.1×)",
							w.Name, a, v, fmtVal(r.fieldOf(k, sysCPU).med), fmtVal(r.fieldOf(h, sysCPU).med))
					} else {
						skip("%s: %s: no system CPU time to compare (too short a window?)", w.Name, a)
					}
					v := spreadOf(r.pairsOf(k, h, peakRSS, ratio))
					add(v.med <= 1, "%s: %s's peak RSS is %s× the Go heap's (%s against %s; target ≤ 1×)", w.Name, a, v,
						mib(int64(r.fieldOf(k, peakRSS).med)), mib(int64(r.fieldOf(h, peakRSS).med)))
				}
			}
		}
	}
	if r.o.has("memory") {
		big := false
		for _, g := range r.memGroups() {
			if g.alloc != bench.RefallocCache || len(g.ms) == 0 {
				continue
			}
			v := g.ratio()
			live := g.of(func(m Measurement) float64 { return float64(m.PeakLive) }).med
			if strings.HasPrefix(g.workload, "larson-") || strings.HasPrefix(g.workload, "threadtest-") {
				add(v.med <= 1.5, "%s T=%d memory: refalloc-cache peak RSS / peak live %s is %s (target ≤ 1.5)",
					g.workload, g.threads, mib(int64(live)), v)
			}
			if live >= issue12Big {
				big = true
				add(v.med <= 1.1, "%s T=%d memory: refalloc-cache peak RSS / peak live %s is %s (≥ 100 MiB live: target ≤ 1.1)",
					g.workload, g.threads, mib(int64(live)), v)
			}
		}
		if !big {
			skip("memory: no workload with ≥ 100 MiB live measured through refalloc-cache (fill-mixed has -fill-bytes)")
		}
	}
	// The ways decision: the default (128 ways since issue 12) must not lose
	// to 32 ways, the default before, or to 16, the one before that.
	if r.o.has("sweep") && slices.Contains(r.o.sweepWays, 128) {
		for _, w := range sweepWorkloads {
			for _, t := range r.o.sweepThreads {
				for _, old := range []int{16, 32} {
					if !slices.Contains(r.o.sweepWays, old) {
						continue
					}
					v := spreadOf(r.pairs(key{"sweep", w, t, bench.RefallocCache, 128},
						key{"sweep", w, t, bench.RefallocCache, old}, speed(true)))
					if !v.ok() {
						skip("sweep %s T=%d: %d and 128 ways not both measured", w, t, old)
						continue
					}
					add(v.med >= 1, "sweep %s T=%d: 128 ways (the default) has %s× the throughput of %d ways (target ≥ 1×)", w, t, v, old)
				}
			}
		}
	}
	return out
}

func (r *runner) loadSummary() {
	var f []float64
	over := 0
	for _, m := range r.results {
		if m.Err == "" {
			f = append(f, m.ForeignPct)
			if m.ForeignPct > 15 {
				over++
			}
		}
	}
	for _, s := range r.stats {
		f = append(f, s.Foreign)
	}
	if len(f) == 0 {
		return
	}
	s := spreadOf(f)
	r.printf("\nCPU used by other processes during the timed windows (%% of all %d CPUs): median %.0f, max %.0f; %d of %d measurements above 15%%.\n",
		runtime.NumCPU(), s.med, s.max, over, len(f))
}

func (r *runner) writeCSVs() error {
	write := func(name string, header []string, rows [][]string) error {
		f, err := os.Create(filepath.Join(r.o.out, name))
		if err != nil {
			return err
		}
		w := csv.NewWriter(f)
		w.Write(header)
		w.WriteAll(rows)
		if err := w.Error(); err != nil {
			f.Close()
			return err
		}
		return f.Close()
	}
	ff := func(v float64) string { return strconv.FormatFloat(v, 'g', 6, 64) }
	itoa := func(v int64) string { return strconv.FormatInt(v, 10) }
	var suite, sweep, mem [][]string
	for _, m := range r.results {
		switch m.Mode {
		case "suite":
			suite = append(suite, []string{m.Workload, strconv.Itoa(m.Threads), m.Alloc, strconv.Itoa(m.Rep), m.Metric,
				ff(m.Value), itoa(m.Ops), ff(m.ElapsedS), strconv.Itoa(m.Procs), ff(m.GCCPUS), ff(m.GCPauseS),
				strconv.Itoa(int(m.NumGC)), ff(m.OwnCPUS), ff(m.ForeignPct), m.Err, ff(m.UserCPUS), ff(m.SysCPUS), itoa(m.PeakRSS)})
		case "sweep":
			hit := math.NaN()
			if m.SmallFrees > 0 {
				hit = 1 - float64(m.Misses)/float64(m.SmallFrees)
			}
			sweep = append(sweep, []string{m.Workload, strconv.Itoa(m.Threads), strconv.Itoa(m.Ways), strconv.Itoa(m.Rep),
				ff(m.Value), strconv.FormatUint(m.SmallFrees, 10), strconv.FormatUint(m.Misses, 10), ff(hit), ff(m.ForeignPct), m.Err})
		case "memory":
			mem = append(mem, []string{m.Workload, strconv.Itoa(m.Threads), m.Alloc, itoa(m.PeakLive), itoa(m.PeakRSS),
				itoa(m.Harness), itoa(m.BaseRSS), ff(memRatio(m)), itoa(m.FreeCommitted), itoa(m.FreeResRSS), itoa(m.FreeRSS),
				itoa(m.TrimCommitted), itoa(m.TrimResRSS), itoa(m.TrimRSS), m.Err, strconv.Itoa(m.Rep)})
		}
	}
	var stats [][]string
	for _, s := range r.stats {
		for _, g := range statsGroups {
			stats = append(stats, []string{strconv.Itoa(s.Pair), onOff(s.Stats), g, ff(s.NsMin[g]), ff(s.Foreign), s.Err})
		}
	}
	if err := write("allocbench.csv", []string{"workload", "threads", "allocator", "run", "metric", "value", "ops",
		"elapsed_s", "gomaxprocs", "gc_cpu_s", "gc_pause_s", "num_gc", "own_cpu_s", "foreign_cpu_pct", "error",
		"user_cpu_s", "sys_cpu_s", "peak_rss"}, suite); err != nil {
		return err
	}
	if err := write("sweep.csv", []string{"workload", "threads", "ways", "run", "mops", "small_frees", "misses",
		"hit_rate", "foreign_cpu_pct", "error"}, sweep); err != nil {
		return err
	}
	if err := write("memory.csv", []string{"workload", "threads", "allocator", "peak_live", "peak_rss", "harness",
		"base_rss", "rss_per_live", "free_committed", "free_reservation_rss", "free_rss", "trim_committed",
		"trim_reservation_rss", "trim_rss", "error", "run"}, mem); err != nil {
		return err
	}
	return write("stats-overhead.csv", []string{"pair", "counters", "group", "ns_per_pair", "foreign_cpu_pct", "error"}, stats)
}
