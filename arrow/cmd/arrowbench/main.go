// Command arrowbench measures Arrow workloads (package-level workloads:
// int64 and string builders, an IPC round trip, a Parquet write) on
// GoAllocator, refalloc (refarrow) and, in cgo builds, Arrow's mallocator:
// time, peak RSS and GC cycles. Every measurement runs in a fresh process
// (the runner re-executes itself with -child), so each has its own Go heap,
// its own reservation and its own VmHWM; repetitions are interleaved, the
// allocator order rotating, and the table shows medians.
//
//	go -C arrow run ./cmd/arrowbench            # 5 runs, writes results/arrowbench.{md,csv}
//	go -C arrow run ./cmd/arrowbench -quick     # CI: small sizes, 2 runs, a few seconds
package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Spec is one measurement, given to the child as JSON.
type Spec struct {
	Workload, Alloc string
	Params          Params
}

// Result is what the child prints.
type Result struct {
	Spec
	Rep       int
	ElapsedS  float64
	PeakRSS   int64 // VmHWM over the RSS before the workload, bytes
	NumGC     uint32
	GCCPUS    float64 // the runtime's estimate of GC CPU time
	HeapAlloc uint64  // cumulative Go-heap bytes allocated during the workload
	Err       string  `json:",omitempty"`
}

func main() {
	if len(os.Args) == 3 && os.Args[1] == "-child" {
		child(os.Args[2])
		return
	}
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "arrowbench:", err)
		os.Exit(1)
	}
}

func child(arg string) {
	var s Spec
	r := Result{}
	if err := json.Unmarshal([]byte(arg), &s); err != nil {
		r.Err = err.Error()
	} else {
		r = measure(s)
	}
	out, _ := json.Marshal(r)
	fmt.Println(string(out))
}

func measure(s Spec) (r Result) {
	r.Spec = s
	fail := func(err error) Result {
		r.Err = err.Error()
		return r
	}
	w, err := workloadByName(s.Workload)
	if err != nil {
		return fail(err)
	}
	k, err := allocKindByName(s.Alloc)
	if err != nil {
		return fail(err)
	}
	a, err := k.new()
	if err != nil {
		return fail(err)
	}
	defer func() {
		if p := recover(); p != nil {
			r.Err = fmt.Sprintf("panic: %v", p)
		}
	}()
	runtime.GC()
	debug.FreeOSMemory()
	base := statusBytes("VmRSS")
	// VmHWM starts again from the current RSS: the peak is the workload's.
	_ = os.WriteFile("/proc/self/clear_refs", []byte("5"), 0)
	g0 := sampleGC()
	t0 := time.Now()
	err = w.run(a.mem, s.Params)
	r.ElapsedS = time.Since(t0).Seconds()
	g1 := sampleGC()
	r.PeakRSS = statusBytes("VmHWM") - base
	r.NumGC, r.GCCPUS, r.HeapAlloc = g1.cycles-g0.cycles, g1.cpu-g0.cpu, g1.alloc-g0.alloc
	if err != nil {
		return fail(err)
	}
	if a.live != nil {
		if n := a.live(); n != 0 {
			return fail(fmt.Errorf("%d bytes still allocated after the workload", n))
		}
	}
	if err := a.close(); err != nil {
		return fail(err)
	}
	return r
}

type gcSample struct {
	cycles uint32
	cpu    float64
	alloc  uint64
}

func sampleGC() gcSample {
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	m := []metrics.Sample{{Name: "/cpu/classes/gc/total:cpu-seconds"}}
	metrics.Read(m)
	g := gcSample{cycles: ms.NumGC, alloc: ms.TotalAlloc}
	if m[0].Value.Kind() == metrics.KindFloat64 {
		g.cpu = m[0].Value.Float64()
	}
	return g
}

// statusBytes reads a "Name:   N kB" line of /proc/self/status; -1 if absent.
func statusBytes(name string) int64 {
	f, err := os.Open("/proc/self/status")
	if err != nil {
		return -1
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), name+":"); ok {
			v, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			return v << 10
		}
	}
	return -1
}

type listFlag []string

func (l *listFlag) String() string { return strings.Join(*l, ",") }
func (l *listFlag) Set(s string) error {
	*l = strings.FieldsFunc(s, func(r rune) bool { return r == ',' || r == ' ' })
	return nil
}

func run(args []string) error {
	fs := flag.NewFlagSet("arrowbench", flag.ContinueOnError)
	quick := fs.Bool("quick", false, "CI mode: small sizes, 2 runs")
	runs := fs.Int("runs", 0, "interleaved repetitions (default 5; 2 with -quick)")
	out := fs.String("out", "", "results directory (default results/, results/quick/ with -quick, in the arrow module)")
	var wnames, anames listFlag
	fs.Var(&wnames, "workloads", "workloads, comma-separated (default all)")
	fs.Var(&anames, "allocators", "allocators, comma-separated (default all this build has: "+strings.Join(kindNames(), ", ")+")")
	if err := fs.Parse(args); err != nil {
		return err
	}
	p := defaultParams()
	if *quick {
		p = quickParams()
	}
	if *runs == 0 {
		*runs = 5
		if *quick {
			*runs = 2
		}
	}
	if len(wnames) == 0 {
		for _, w := range workloads {
			wnames = append(wnames, w.name)
		}
	}
	if len(anames) == 0 {
		anames = kindNames()
	}
	for _, w := range wnames {
		if _, err := workloadByName(w); err != nil {
			return err
		}
	}
	for _, a := range anames {
		if _, err := allocKindByName(a); err != nil {
			return err
		}
	}
	if *out == "" {
		*out = "results"
		if *quick {
			*out = filepath.Join("results", "quick")
		}
	}
	self, err := os.Executable()
	if err != nil {
		return err
	}

	start := time.Now()
	var results []Result
	failed := 0
	for rep := range *runs {
		for _, w := range wnames {
			order := append(slices.Clone(anames[rep%len(anames):]), anames[:rep%len(anames)]...)
			for _, a := range order {
				r := runChild(self, Spec{Workload: w, Alloc: a, Params: p})
				r.Rep = rep + 1
				results = append(results, r)
				status := fmt.Sprintf("%.0f ms, peak RSS %.1f MiB, %d GCs", 1e3*r.ElapsedS, mib(r.PeakRSS), r.NumGC)
				if r.Err != "" {
					status = "FAILED: " + r.Err
					failed++
				}
				fmt.Fprintf(os.Stderr, "run %d/%d %-15s %-10s %s\n", rep+1, *runs, w, a, status)
			}
		}
	}

	var md bytes.Buffer
	report(io.MultiWriter(os.Stdout, &md), results, wnames, anames, p, *runs, *quick, time.Since(start))
	if err := os.MkdirAll(*out, 0o755); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(*out, "arrowbench.md"), md.Bytes(), 0o644); err != nil {
		return err
	}
	if err := writeCSV(filepath.Join(*out, "arrowbench.csv"), results); err != nil {
		return err
	}
	fmt.Fprintf(os.Stderr, "arrowbench: wrote arrowbench.md and arrowbench.csv in %s\n", *out)
	if failed > 0 {
		return fmt.Errorf("%d measurements failed", failed)
	}
	return nil
}

func runChild(self string, s Spec) Result {
	arg, _ := json.Marshal(s)
	cmd := exec.Command(self, "-child", string(arg))
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	lines := strings.Split(strings.TrimSpace(stdout.String()), "\n")
	var r Result
	if jerr := json.Unmarshal([]byte(lines[len(lines)-1]), &r); jerr != nil {
		return Result{Spec: s, Err: fmt.Sprintf("child: %v: %s", err, strings.TrimSpace(stderr.String()))}
	}
	if err != nil && r.Err == "" {
		r.Err = err.Error()
	}
	return r
}

func mib(b int64) float64 { return float64(b) / (1 << 20) }

func median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

type summary struct {
	n                                   int
	timeMS, rssMiB, gcs, gcCPU, heapMiB float64
	timeMin, timeMax                    float64
}

func summarize(results []Result, w, a string) summary {
	var t, rss, gcs, cpu, heap []float64
	for _, r := range results {
		if r.Workload == w && r.Alloc == a && r.Err == "" {
			t = append(t, 1e3*r.ElapsedS)
			rss = append(rss, mib(r.PeakRSS))
			gcs = append(gcs, float64(r.NumGC))
			cpu = append(cpu, 1e3*r.GCCPUS)
			heap = append(heap, mib(int64(r.HeapAlloc)))
		}
	}
	if len(t) == 0 {
		return summary{}
	}
	return summary{len(t), median(t), median(rss), median(gcs), median(cpu), median(heap), slices.Min(t), slices.Max(t)}
}

func report(w io.Writer, results []Result, wnames, anames []string, p Params, runs int, quick bool, took time.Duration) {
	mode := "default"
	if quick {
		mode = "quick"
	}
	fmt.Fprintf(w, "# arrowbench %s\n\n", time.Now().UTC().Format("2006-01-02 15:04 UTC"))
	fmt.Fprintf(w, "Host: %s/%s, %d CPUs, %s, Arrow v18.8.0. Mode: %s (%+v); medians of %d interleaved runs, each in a fresh process.\n\n",
		runtime.GOOS, runtime.GOARCH, runtime.NumCPU(), runtime.Version(), mode, p, runs)
	fmt.Fprintln(w, "| workload | allocator | time (ms) | min–max | × go | peak RSS (MiB) | × go | GC cycles | GC CPU (ms) | Go heap allocated (MiB) | runs |")
	fmt.Fprintln(w, "|---|---|---:|---|---:|---:|---:|---:|---:|---:|---:|")
	for _, wn := range wnames {
		ref := summarize(results, wn, "go")
		for _, an := range anames {
			s := summarize(results, wn, an)
			if s.n == 0 {
				fmt.Fprintf(w, "| %s | %s | failed | | | | | | | | 0 |\n", wn, an)
				continue
			}
			fmt.Fprintf(w, "| %s | %s | %.1f | %.0f–%.0f | %s | %.1f | %s | %.0f | %.1f | %.1f | %d |\n",
				wn, an, s.timeMS, s.timeMin, s.timeMax, ratio(s.timeMS, ref.timeMS), s.rssMiB, ratio(s.rssMiB, ref.rssMiB), s.gcs, s.gcCPU, s.heapMiB, s.n)
		}
	}
	fmt.Fprintln(w, "\nWorkloads (each repeats Rounds times in one process):")
	for _, wl := range workloads {
		if slices.Contains(wnames, wl.name) {
			fmt.Fprintf(w, "- %s: %s.\n", wl.name, wl.about)
		}
	}
	fmt.Fprintf(w, "\nPeak RSS is VmHWM over the RSS just before the workload (after a GC). Benchmark time: %s.\n", took.Round(time.Second))
}

func ratio(x, ref float64) string {
	if ref == 0 {
		return "–"
	}
	return fmt.Sprintf("%.2f", x/ref)
}

func writeCSV(path string, results []Result) error {
	var b bytes.Buffer
	fmt.Fprintln(&b, "workload,allocator,rep,elapsed_s,peak_rss_bytes,num_gc,gc_cpu_s,go_heap_alloc_bytes,error")
	for _, r := range results {
		fmt.Fprintf(&b, "%s,%s,%d,%.6f,%d,%d,%.6f,%d,%q\n", r.Workload, r.Alloc, r.Rep, r.ElapsedS, r.PeakRSS, r.NumGC, r.GCCPUS, r.HeapAlloc, r.Err)
	}
	return os.WriteFile(path, b.Bytes(), 0o644)
}
