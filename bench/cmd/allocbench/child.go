package main

import (
	"encoding/json"
	"fmt"
	"os"
	"runtime"
	"runtime/debug"

	"github.com/refalloc/refalloc/bench"
	"github.com/refalloc/refalloc/impl"
)

// Every measurement runs in a child process (the runner re-executes itself
// with -child): each starts with a fresh Go heap and a fresh reservation,
// GOMAXPROCS fits the workload, and VmHWM belongs to one allocator×workload.

// Spec is one measurement, sent to the child as JSON.
type Spec struct {
	Mode     string // "time" (throughput, also the sweep) or "memory"
	Workload string
	Alloc    string
	Threads  int
	Ways     int // refalloc's superblock-cache ways, 0 = default
	Params   bench.Params
}

// Measurement is what the child prints (one JSON line) and the runner records.
type Measurement struct {
	Spec
	Rep        int     `json:"-"`
	Metric     string  // the workload's unit
	Value      float64 // in Metric
	Ops        int64
	ElapsedS   float64
	Procs      int     // GOMAXPROCS
	GCCPUS     float64 // GC CPU seconds in the timed window (runtime estimate)
	GCPauseS   float64 // stop-the-world GC pauses in the window
	NumGC      uint32
	OwnCPUS    float64 // this process's CPU in the window
	UserCPUS   float64 // its user part (getrusage)
	SysCPUS    float64 // its system (kernel) part: page faults, madvise, mmap
	ForeignPct float64 // other processes' CPU in the window, % of the machine

	// refalloc only: small-object frees and superblock-cache misses in the
	// window (the sweep's hit rate).
	SmallFrees, Misses uint64

	// memory mode, bytes (BaseRSS and PeakRSS in every mode). RSS figures are
	// over the baseline taken before the workload; -1 = not applicable.
	BaseRSS, PeakRSS, PeakLive, Harness int64
	FreeCommitted, FreeResRSS, FreeRSS  int64 // after every object is freed
	TrimCommitted, TrimResRSS, TrimRSS  int64 // after Trim (Go heap: GC + FreeOSMemory)

	Err string `json:",omitempty"`
}

func runChild(arg string) {
	var s Spec
	if err := json.Unmarshal([]byte(arg), &s); err != nil {
		fmt.Fprintln(os.Stderr, "allocbench -child:", err)
		os.Exit(2)
	}
	m, err := measure(s)
	if err != nil {
		m.Err = err.Error()
	}
	out, _ := json.Marshal(m)
	fmt.Println(string(out))
	if err != nil {
		os.Exit(1)
	}
}

func measure(s Spec) (m Measurement, err error) {
	m.Spec = s
	var w *bench.Workload
	for _, x := range bench.Workloads(s.Params) {
		if x.Name == s.Workload {
			w = &x
		}
	}
	if w == nil {
		return m, fmt.Errorf("unknown workload %q", s.Workload)
	}
	kind, err := bench.KindByName(s.Alloc)
	if err != nil {
		return m, err
	}
	m.Metric = w.Metric
	m.Procs = min(w.Procs(s.Threads), runtime.NumCPU())
	runtime.GOMAXPROCS(m.Procs)
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("panic: %v", r)
		}
	}()

	a, err := kind.New(bench.Config{RemoteFrees: w.RemoteFrees, Ways: s.Ways})
	if err != nil {
		return m, err
	}
	var ra *impl.Allocator
	if r, ok := a.(bench.Refallocer); ok {
		ra = r.Refalloc()
	}
	env := &bench.Env{Alloc: a, Threads: s.Threads}
	var tracker *bench.Tracker
	m.BaseRSS, m.PeakRSS, m.PeakLive = -1, -1, -1
	m.FreeCommitted, m.FreeResRSS, m.FreeRSS = -1, -1, -1
	m.TrimCommitted, m.TrimResRSS, m.TrimRSS = -1, -1, -1
	runtime.GC()
	if s.Mode == "memory" {
		debug.FreeOSMemory()
		tracker = new(bench.Tracker)
		env.Alloc = tracker.Wrap(a)
	}
	// Peak RSS in every mode (the grow cycle's table reports it from the
	// timed runs): VmHWM restarts from here.
	m.BaseRSS = statusKB("VmRSS")
	resetPeakRSS()

	var c0 cpuSample
	var u0, s0 float64
	var g0 gcSample
	var st0 impl.Stats
	env.OnStart = func() {
		if ra != nil {
			st0 = ra.Stats()
		}
		g0 = sampleGC()
		u0, s0 = ownUserSys()
		c0 = sampleCPU(u0 + s0)
	}
	env.OnStop = func() {
		u1, s1 := ownUserSys()
		c1 := sampleCPU(u1 + s1)
		m.UserCPUS, m.SysCPUS = u1-u0, s1-s0
		g1 := sampleGC()
		m.ForeignPct = foreignPct(c0, c1)
		m.OwnCPUS = c1.own - c0.own
		m.GCCPUS = g1.cpu - g0.cpu
		m.GCPauseS = g1.pause - g0.pause
		m.NumGC = g1.cycles - g0.cycles
		if ra != nil {
			st1 := ra.Stats()
			m.Misses = st1.SuperblockCacheMisses - st0.SuperblockCacheMisses
			m.SmallFrees = smallFrees(st1) - smallFrees(st0)
		}
	}
	res := w.Run(env)
	m.Value, m.Ops, m.ElapsedS = res.Value, res.Ops, res.Elapsed.Seconds()
	m.PeakRSS = statusKB("VmHWM") - m.BaseRSS

	if s.Mode == "memory" {
		m.PeakLive = tracker.Peak()
		m.Harness = res.HarnessBytes
		if l := tracker.Live(); l != 0 {
			return m, fmt.Errorf("%d bytes still live after the workload", l)
		}
		m.FreeCommitted, m.FreeResRSS, m.FreeRSS = memNow(ra, m.BaseRSS)
		if t, ok := a.(bench.Trimmer); ok {
			if err := t.Trim(); err != nil {
				return m, fmt.Errorf("Trim: %w", err)
			}
		}
		runtime.GC()
		debug.FreeOSMemory()
		m.TrimCommitted, m.TrimResRSS, m.TrimRSS = memNow(ra, m.BaseRSS)
	}
	if err := a.Close(); err != nil {
		return m, fmt.Errorf("Close: %w", err)
	}
	return m, nil
}

// memNow returns refalloc's Committed and the resident size of its
// reservation (-1 for other allocators) and the process's RSS over base.
func memNow(ra *impl.Allocator, base int64) (committed, resRSS, rss int64) {
	committed, resRSS = -1, -1
	if ra != nil {
		ra.Flush()
		committed = int64(ra.Stats().Committed)
		snap := ra.Snapshot()
		resRSS = mappingRSS(snap.Base, snap.Size)
	}
	return committed, resRSS, statusKB("VmRSS") - base
}

func smallFrees(s impl.Stats) uint64 {
	var n uint64
	for _, c := range s.Classes {
		n += c.Frees
	}
	return n
}
