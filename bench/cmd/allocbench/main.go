// Command allocbench runs refalloc's benchmark suite: every workload of package
// bench against every allocator, with interleaved repetitions, then the memory
// pass, the statistics-overhead comparison and the superblock-cache sweep. It
// prints one markdown table per workload and the targets as PASS/MISS lines,
// and writes CSV files, a markdown report and an SVG chart under
// bench/results/ (bench/results/quick/ with -quick).
//
//	go -C bench run ./cmd/allocbench            # full suite, 5 runs (~16 min)
//	go -C bench run ./cmd/allocbench -quick     # CI: under ~3 min
//	go -C bench run ./cmd/allocbench -workloads larson-8-1000,pair-64-keep1 \
//	    -allocators refalloc-cache,go-heap -runs 3 -phases suite
//
// See bench/README.md.
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/refalloc/refalloc/bench"
)

type options struct {
	quick        bool
	runs         int
	workloads    []string // patterns
	allocators   []string
	threads      []int
	phases       []string
	out          string
	anchors      string
	memWorkloads []string
	memRuns      int
	statsPairs   int
	statsRounds  int
	sweepThreads []int
	sweepWays    []int
	timeout      time.Duration
	params       bench.Params
}

var allPhases = []string{"suite", "memory", "stats", "sweep"}

func main() {
	if len(os.Args) > 2 && os.Args[1] == "-child" {
		runChild(os.Args[2])
		return
	}
	o, err := parseFlags(os.Args[1:])
	if err != nil {
		fmt.Fprintln(os.Stderr, "allocbench:", err)
		os.Exit(2)
	}
	if err := run(o); err != nil {
		fmt.Fprintln(os.Stderr, "allocbench:", err)
		os.Exit(1)
	}
}

type listFlag struct{ v *[]string }

func (l listFlag) String() string {
	if l.v == nil {
		return ""
	}
	return strings.Join(*l.v, ",")
}

func (l listFlag) Set(s string) error {
	*l.v = nil
	for _, x := range strings.FieldsFunc(s, func(r rune) bool { return r == ',' || r == ' ' }) {
		*l.v = append(*l.v, x)
	}
	return nil
}

type intsFlag struct{ v *[]int }

func (l intsFlag) String() string {
	if l.v == nil {
		return ""
	}
	s := make([]string, len(*l.v))
	for i, x := range *l.v {
		s[i] = strconv.Itoa(x)
	}
	return strings.Join(s, ",")
}

func (l intsFlag) Set(s string) error {
	*l.v = nil
	for _, x := range strings.FieldsFunc(s, func(r rune) bool { return r == ',' || r == ' ' }) {
		n, err := strconv.Atoi(x)
		if err != nil || n < 1 {
			return fmt.Errorf("bad number %q", x)
		}
		*l.v = append(*l.v, n)
	}
	return nil
}

// bindParams declares a flag for every workload parameter, bound to p.
func bindParams(fs *flag.FlagSet, p *bench.Params) {
	fs.Float64Var(&p.LarsonSeconds, "larson-seconds", p.LarsonSeconds, "larson: timed window per run, seconds")
	fs.IntVar(&p.LarsonChunks, "larson-chunks", p.LarsonChunks, "larson: chunks_per_thread")
	fs.IntVar(&p.LarsonRounds, "larson-rounds", p.LarsonRounds, "larson: rounds (a goroutine hands over after rounds×chunks ops)")
	fs.Uint64Var(&p.LarsonSeed, "larson-seed", p.LarsonSeed, "larson: seed")
	fs.IntVar(&p.TTIterations, "tt-iterations", p.TTIterations, "threadtest: iterations")
	fs.IntVar(&p.TTObjects, "tt-objects", p.TTObjects, "threadtest: objects (divided among the goroutines)")
	fs.IntVar(&p.TTWork, "tt-work", p.TTWork, "threadtest: busy-loop steps after each alloc and free")
	fs.IntVar(&p.TTWords, "tt-words", p.TTWords, "threadtest: object size in 8-byte words")
	fs.IntVar(&p.LSSize, "ls-size", p.LSSize, "linux-scalability: object size")
	fs.IntVar(&p.LSIterations, "ls-iterations", p.LSIterations, "linux-scalability: objects per goroutine")
	fs.IntVar(&p.CacheIterations, "cache-iterations", p.CacheIterations, "cache-thrash/scratch: iterations")
	fs.IntVar(&p.CacheObjSize, "cache-objsize", p.CacheObjSize, "cache-thrash/scratch: object size")
	fs.IntVar(&p.CacheReps, "cache-reps", p.CacheReps, "cache-thrash/scratch: repetitions (divided among the goroutines)")
	fs.Float64Var(&p.XMSeconds, "xm-seconds", p.XMSeconds, "xmalloc-test: timed window per run, seconds")
	fs.IntVar(&p.XMSize, "xm-size", p.XMSize, "xmalloc-test: object size")
	fs.IntVar(&p.XMBatch, "xm-batch", p.XMBatch, "xmalloc-test: objects per batch")
	fs.IntVar(&p.XMQueue, "xm-queue", p.XMQueue, "xmalloc-test: most batches queued")
	fs.IntVar(&p.PairKeepN, "pair-keep-n", p.PairKeepN, "pair keep1: pairs per run")
	fs.IntVar(&p.PairBatchN, "pair-batch-n", p.PairBatchN, "pair batch1000: pairs per run")
	fs.Var(intsFlag{&p.PairSizes}, "pair-sizes", "pair: object sizes")
	fs.Int64Var(&p.GorOps, "gor-ops", p.GorOps, "goroutines: alloc+free pairs in all")
	fs.IntVar(&p.GorLife, "gor-life", p.GorLife, "goroutines: pairs each goroutine makes before a successor takes over")
	fs.Var(intsFlag{&p.GorCounts}, "gor-counts", "goroutines: numbers of goroutines at once (one workload each)")
	fs.IntVar(&p.GrowStart, "grow-start", p.GrowStart, "grow-cycle: first size of the buffer, bytes")
	fs.IntVar(&p.GrowMax, "grow-max", p.GrowMax, "grow-cycle: size the buffer doubles up to, bytes")
	fs.IntVar(&p.GrowCycles, "grow-cycles", p.GrowCycles, "grow-cycle: cycles (grow, then free)")
	fs.IntVar(&p.FillBytes, "fill-bytes", p.FillBytes, "fill-mixed: bytes live after the fill")
	fs.IntVar(&p.FillChurn, "fill-churn", p.FillChurn, "fill-mixed: replacements, in multiples of the number of objects")
}

func parseFlags(args []string) (*options, error) {
	o := &options{params: bench.DefaultParams()}
	fs := flag.NewFlagSet("allocbench", flag.ContinueOnError)
	fs.BoolVar(&o.quick, "quick", false, "CI mode: workloads cut 5–10×, 3 runs, fewer stats pairs (whole suite under ~3 min)")
	fs.IntVar(&o.runs, "runs", 0, "interleaved repetitions (default 5; 3 with -quick)")
	fs.Var(listFlag{&o.workloads}, "workloads", "workloads to run: names or patterns (path.Match), comma-separated; default all (-list shows them)")
	fs.Var(listFlag{&o.allocators}, "allocators", "allocators to run, comma-separated; default all; refalloc-cache is always run (ratios are to it)")
	o.threads = []int{1, 2}
	fs.Var(intsFlag{&o.threads}, "threads", "thread counts for the multi-goroutine workloads")
	o.phases = allPhases
	fs.Var(listFlag{&o.phases}, "phases", "phases to run: suite, memory, stats, sweep")
	fs.StringVar(&o.out, "out", "", "results directory (default bench/results, bench/results/quick with -quick)")
	fs.StringVar(&o.anchors, "anchors", "", "C anchors CSV (default bench/results/c-anchors.csv)")
	o.memWorkloads = []string{"larson-*", "threadtest-*", "linux-scalability-*", "xmalloc-test-*", "fill-*"}
	fs.Var(listFlag{&o.memWorkloads}, "mem-workloads", "workloads of the memory pass (run at the largest -threads)")
	fs.IntVar(&o.memRuns, "mem-runs", 1, "memory pass: interleaved repetitions (ratios are medians over them)")
	fs.IntVar(&o.statsPairs, "stats-pairs", 0, "stats overhead: interleaved on/off pairs of runs (default 10; 3 with -quick)")
	fs.IntVar(&o.statsRounds, "stats-rounds", 0, "stats overhead: rounds per run (default 7; 3 with -quick)")
	o.sweepThreads = []int{1, 2}
	fs.Var(intsFlag{&o.sweepThreads}, "sweep-threads", "superblock-cache sweep: thread counts")
	o.sweepWays = []int{1, 8, 16, 32, 64, 128}
	fs.Var(intsFlag{&o.sweepWays}, "sweep-ways", "superblock-cache sweep: ways")
	fs.DurationVar(&o.timeout, "timeout", 10*time.Minute, "longest single measurement")
	list := fs.Bool("list", false, "list the workloads and allocators and exit")
	bindParams(fs, &o.params)
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	if fs.NArg() > 0 {
		return nil, fmt.Errorf("unexpected argument %q", fs.Arg(0))
	}
	if o.quick {
		// Quick parameters, except those given on the command line.
		q := bench.QuickParams()
		qs := flag.NewFlagSet("quick", flag.ContinueOnError)
		bindParams(qs, &q)
		var err error
		fs.Visit(func(f *flag.Flag) {
			if qf := qs.Lookup(f.Name); qf != nil && err == nil {
				err = qf.Value.Set(f.Value.String())
			}
		})
		if err != nil {
			return nil, err
		}
		o.params = q
	}
	def := func(v *int, full, quick int) {
		if *v == 0 {
			*v = full
			if o.quick {
				*v = quick
			}
		}
	}
	def(&o.runs, 5, 3)
	if o.memRuns < 1 {
		return nil, fmt.Errorf("-mem-runs %d: want at least 1", o.memRuns)
	}
	def(&o.statsPairs, 10, 3)
	def(&o.statsRounds, 7, 3)
	for _, ph := range o.phases {
		if !slices.Contains(allPhases, ph) {
			return nil, fmt.Errorf("unknown phase %q", ph)
		}
	}
	for _, a := range o.allocators {
		if _, err := bench.KindByName(a); err != nil {
			return nil, err
		}
	}
	if len(o.allocators) > 0 && !slices.Contains(o.allocators, bench.RefallocCache) {
		o.allocators = append([]string{bench.RefallocCache}, o.allocators...)
	}
	for _, p := range append(slices.Clone(o.workloads), o.memWorkloads...) {
		if !slices.ContainsFunc(bench.Workloads(o.params), func(w bench.Workload) bool { return match(p, w.Name) }) {
			return nil, fmt.Errorf("no workload matches %q (-list shows them)", p)
		}
	}
	if *list {
		for _, w := range bench.Workloads(o.params) {
			fmt.Printf("%-22s %-7s %s\n", w.Name, w.Metric, w.About)
		}
		for _, k := range bench.Kinds {
			fmt.Println("allocator", k.Name)
		}
		os.Exit(0)
	}
	return o, nil
}

func match(pattern, name string) bool {
	ok, _ := path.Match(pattern, name)
	return ok || pattern == name
}

func (o *options) has(phase string) bool { return slices.Contains(o.phases, phase) }

func (o *options) selectedWorkloads(patterns []string) []bench.Workload {
	var ws []bench.Workload
	for _, w := range bench.Workloads(o.params) {
		if len(patterns) == 0 || slices.ContainsFunc(patterns, func(p string) bool { return match(p, w.Name) }) {
			ws = append(ws, w)
		}
	}
	return ws
}

func (o *options) kindsFor(w bench.Workload) []bench.Kind {
	var ks []bench.Kind
	for _, k := range bench.Kinds {
		if k.PairOnly && !strings.HasPrefix(w.Name, "pair-") {
			continue
		}
		if len(o.allocators) == 0 || slices.Contains(o.allocators, k.Name) {
			ks = append(ks, k)
		}
	}
	return ks
}

func (o *options) threadsFor(w bench.Workload) []int {
	if w.SingleThreaded {
		return []int{1}
	}
	return o.threads
}

// moduleDir finds bench/'s module root: the runner is meant to be started with
// `go -C bench run`, but works from the repository root too.
func moduleDir() (string, error) {
	wd, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for _, d := range []string{wd, filepath.Join(wd, "bench")} {
		if data, err := os.ReadFile(filepath.Join(d, "go.mod")); err == nil &&
			bytes.Contains(data, []byte("module github.com/refalloc/refalloc/bench")) {
			return d, nil
		}
	}
	return "", errors.New("run me from bench/ (go -C bench run ./cmd/allocbench) or the repository root")
}

// runner holds the state of one invocation.
type runner struct {
	o       *options
	modDir  string
	self    string
	results []Measurement // suite, sweep and memory measurements
	stats   []statsRun
	done    int
	total   int
	start   time.Time
	report  io.Writer // stdout and the markdown file
	notes   []string  // said at the end: failures, missing peers
}

func run(o *options) error {
	modDir, err := moduleDir()
	if err != nil {
		return err
	}
	if o.out == "" {
		o.out = filepath.Join(modDir, "results")
		if o.quick {
			o.out = filepath.Join(o.out, "quick")
		}
	}
	if o.anchors == "" {
		o.anchors = filepath.Join(modDir, "results", "c-anchors.csv")
	}
	if err := os.MkdirAll(o.out, 0o755); err != nil {
		return err
	}
	self, err := os.Executable()
	if err != nil {
		return err
	}
	r := &runner{o: o, modDir: modDir, self: self, start: time.Now()}
	var md bytes.Buffer
	r.report = io.MultiWriter(os.Stdout, &md)

	pre := sampleCPU(0)
	time.Sleep(time.Second)
	idle := foreignPct(pre, sampleCPU(0))
	r.printf("# allocbench %s\n\n", time.Now().UTC().Format("2006-01-02 15:04 UTC"))
	r.printf("Host: %s, %d CPUs (%s), %s. Mode: %s; runs=%d (interleaved); threads=%v.\n",
		runtime.GOOS+"/"+runtime.GOARCH, runtime.NumCPU(), cpuModel(), runtime.Version(), modeName(o.quick), o.runs, o.threads)
	r.printf("refalloc: %s.\n", implVersion(modDir))
	r.printf("CPU used by other processes in the 1 s before the benchmark: %.0f%% of the machine.\n\n", idle)
	if idle > 15 {
		fmt.Fprintf(os.Stderr, "allocbench: warning: other processes use %.0f%% of the CPUs; results will be noisy\n", idle)
	}

	r.total = r.countPlanned()
	if o.has("suite") {
		r.runSuite()
	}
	if o.has("memory") {
		r.runMemory()
	}
	if o.has("stats") {
		if err := r.runStats(); err != nil {
			r.notes = append(r.notes, "stats overhead not measured: "+err.Error())
		}
	}
	if o.has("sweep") {
		r.runSweep()
	}
	fmt.Fprintf(os.Stderr, "\nallocbench: measured in %s\n\n", time.Since(r.start).Round(time.Second))

	anchors, aerr := readAnchors(o.anchors)
	if aerr != nil {
		r.notes = append(r.notes, "C anchors not used: "+aerr.Error())
	}
	r.writeReport(anchors)
	r.printf("\nBenchmark time: %s.\n", time.Since(r.start).Round(time.Second))
	for _, n := range r.notes {
		r.printf("Note: %s\n", n)
	}
	if err := os.WriteFile(filepath.Join(o.out, "allocbench.md"), md.Bytes(), 0o644); err != nil {
		return err
	}
	if err := r.writeCSVs(); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(o.out, "allocbench.svg"), r.chart(), 0o644); err != nil {
		return err
	}
	fmt.Fprintf(os.Stderr, "allocbench: wrote allocbench.{md,csv,svg}, memory.csv, stats-overhead.csv, sweep.csv in %s\n", o.out)
	return nil
}

// implVersion says which refalloc was measured: the commit, and whether impl/
// had uncommitted changes (read-only git commands).
func implVersion(modDir string) string {
	root := filepath.Dir(modDir)
	out, err := exec.Command("git", "-C", root, "rev-parse", "--short", "HEAD").Output()
	if err != nil {
		return "version unknown (no git)"
	}
	v := "commit " + strings.TrimSpace(string(out))
	if st, err := exec.Command("git", "-C", root, "status", "--porcelain", "--", "impl", "spec").Output(); err == nil && len(st) > 0 {
		v += fmt.Sprintf(" with uncommitted changes in impl/ or spec/ (%d files)", strings.Count(string(st), "\n"))
	}
	return v
}

func modeName(quick bool) string {
	if quick {
		return "quick"
	}
	return "default"
}

func (r *runner) printf(format string, args ...any) { fmt.Fprintf(r.report, format, args...) }

func (r *runner) countPlanned() int {
	n := 0
	o := r.o
	if o.has("suite") {
		for _, w := range o.selectedWorkloads(o.workloads) {
			n += o.runs * len(o.threadsFor(w)) * len(o.kindsFor(w))
		}
	}
	if o.has("memory") {
		for _, w := range o.selectedWorkloads(o.memWorkloads) {
			n += o.memRuns * len(o.kindsFor(w))
		}
	}
	if o.has("stats") {
		n += 2 * o.statsPairs
	}
	if o.has("sweep") {
		n += o.runs * len(o.sweepThreads) * len(o.sweepWays) * len(sweepWorkloads)
	}
	return n
}

// progress prints one line per finished measurement on stderr, with an
// estimate of the time left.
func (r *runner) progress(what string, result string, foreign float64) {
	r.done++
	el := time.Since(r.start)
	eta := "?"
	if r.done > 0 && r.done <= r.total {
		eta = (time.Duration(float64(el) / float64(r.done) * float64(r.total-r.done))).Round(time.Second).String()
	}
	fmt.Fprintf(os.Stderr, "[%3d/%d %s, ~%s left] %-52s %s (other processes %.0f%% CPU)\n",
		r.done, r.total, el.Round(time.Second), eta, what, result, foreign)
}

// rotate returns ks rotated by i, so that no allocator always runs first (or
// right after the same neighbour) in a repetition.
func rotate[T any](ks []T, i int) []T {
	if len(ks) == 0 {
		return ks
	}
	i %= len(ks)
	return append(slices.Clone(ks[i:]), ks[:i]...)
}

func (r *runner) child(s Spec, rep int) Measurement {
	arg, _ := json.Marshal(s)
	ctx, cancel := context.WithTimeout(context.Background(), r.o.timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, r.self, "-child", string(arg))
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	var m Measurement
	lines := strings.Split(strings.TrimSpace(stdout.String()), "\n")
	if jerr := json.Unmarshal([]byte(lines[len(lines)-1]), &m); jerr != nil {
		m = Measurement{Spec: s, Err: fmt.Sprintf("%v: %s", err, lastLines(stderr.String(), 5))}
	} else if err != nil && m.Err == "" {
		m.Err = err.Error()
	}
	m.Spec = s
	m.Rep = rep
	if m.Err != "" {
		r.notes = append(r.notes, fmt.Sprintf("%s %s T=%d %s run %d failed: %s", s.Mode, s.Workload, s.Threads, s.Alloc, rep, m.Err))
	}
	return m
}

func lastLines(s string, n int) string {
	l := strings.Split(strings.TrimSpace(s), "\n")
	return strings.Join(l[max(0, len(l)-n):], " | ")
}

func (r *runner) runSuite() {
	o := r.o
	ws := o.selectedWorkloads(o.workloads)
	for rep := 1; rep <= o.runs; rep++ {
		for _, w := range ws {
			for _, t := range o.threadsFor(w) {
				for _, k := range rotate(o.kindsFor(w), rep-1) {
					s := Spec{Mode: "suite", Workload: w.Name, Alloc: k.Name, Threads: t, Params: o.params}
					m := r.child(s, rep)
					r.results = append(r.results, m)
					r.progress(fmt.Sprintf("run %d/%d %s T=%d %s", rep, o.runs, w.Name, t, k.Name), describe(m), m.ForeignPct)
				}
			}
		}
	}
}

func describe(m Measurement) string {
	if m.Err != "" {
		return "FAILED"
	}
	return fmt.Sprintf("%s %s", fmtVal(m.Value), m.Metric)
}

// runMemory runs the memory pass -mem-runs times, interleaved as the suite
// is: for each run, each workload, each allocator (rotated).
func (r *runner) runMemory() {
	o := r.o
	t := slices.Max(o.threads)
	for rep := 1; rep <= o.memRuns; rep++ {
		for _, w := range o.selectedWorkloads(o.memWorkloads) {
			tt := t
			if w.SingleThreaded {
				tt = 1
			}
			for _, k := range rotate(o.kindsFor(w), rep-1) {
				s := Spec{Mode: "memory", Workload: w.Name, Alloc: k.Name, Threads: tt, Params: o.params}
				m := r.child(s, rep)
				r.results = append(r.results, m)
				res := "FAILED"
				if m.Err == "" {
					res = fmt.Sprintf("peak live %s, peak RSS +%s", mib(m.PeakLive), mib(m.PeakRSS))
				}
				r.progress(fmt.Sprintf("memory run %d/%d %s T=%d %s", rep, o.memRuns, w.Name, tt, k.Name), res, m.ForeignPct)
			}
		}
	}
}

// sweepWorkloads are the two larsons: frees scatter over every superblock the
// slot array spans, which is what the superblock cache is for; 100–200 B
// spreads them over a few classes (about 30 superblocks on one goroutine),
// 8–1000 B over 28 (about 100).
var sweepWorkloads = []string{"larson-100-200", "larson-8-1000"}

func (r *runner) runSweep() {
	o := r.o
	for rep := 1; rep <= o.runs; rep++ {
		for _, w := range sweepWorkloads {
			for _, t := range o.sweepThreads {
				for _, ways := range rotate(o.sweepWays, rep-1) {
					s := Spec{Mode: "sweep", Workload: w, Alloc: bench.RefallocCache, Threads: t, Ways: ways, Params: o.params}
					m := r.child(s, rep)
					r.results = append(r.results, m)
					res := describe(m)
					if m.SmallFrees > 0 {
						res += fmt.Sprintf(", hit rate %.4f", 1-float64(m.Misses)/float64(m.SmallFrees))
					}
					r.progress(fmt.Sprintf("sweep run %d/%d %s T=%d ways=%d", rep, o.runs, w, t, ways), res, m.ForeignPct)
				}
			}
		}
	}
}
