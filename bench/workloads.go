package bench

import (
	"encoding/binary"
	"fmt"
	"sync"
	"sync/atomic"
	"time"
)

// Params are the workloads' parameters, with shared/BENCHMARKS.md's defaults
// in DefaultParams; cmd/allocbench exposes each as a flag.
type Params struct {
	// larson: seconds chunks_per_thread rounds seed (min/max are the two
	// variants, 8–1000 and 100–200). LarsonOps > 0 replaces the timed window
	// by a fixed number of operations in all (go test benchmarks).
	LarsonSeconds float64
	LarsonChunks  int
	LarsonRounds  int
	LarsonSeed    uint64
	LarsonOps     int64

	// threadtest: iterations objects work size (in 8-byte words).
	TTIterations int
	TTObjects    int
	TTWork       int
	TTWords      int

	// linux-scalability: size iterations (per thread).
	LSSize       int
	LSIterations int

	// cache-thrash and cache-scratch: iterations objsize repetitions.
	CacheIterations int
	CacheObjSize    int
	CacheReps       int

	// xmalloc-test: -t -s -b -q; XMFrees > 0 replaces the timed window by a
	// fixed number of frees (go test benchmarks).
	XMSeconds float64
	XMSize    int
	XMBatch   int
	XMQueue   int
	XMFrees   int64

	// goroutines-G: alloc+free pairs in all, split among G lanes that run at
	// once on 2 Ps; each lane is a chain of goroutines of GorLife pairs each,
	// a successor inheriting its predecessor's objects. GorCounts are the Gs.
	GorOps    int64
	GorLife   int
	GorCounts []int

	// grow-cycle: one goroutine grows a buffer by doubling from GrowStart
	// bytes up to GrowMax (the last step capped at it) through Realloc,
	// touching every page it adds, frees it, and does it GrowCycles times.
	GrowStart  int
	GrowMax    int
	GrowCycles int

	// fill-mixed: one goroutine allocates objects of mixed sizes (16–4096 B,
	// and one in 512 of 64 KiB–2 MiB, about half the bytes each), touching
	// every page, until FillBytes are live, then replaces FillChurn×(their
	// number) random ones, then frees them all.
	FillBytes int
	FillChurn int

	// pair: alloc+free pairs per measurement (sizes above 256 B run
	// n×256/size), keeping one block live, and in batches of 1000; sizes.
	PairKeepN  int
	PairBatchN int
	PairSizes  []int
	// PairExactN: every size runs exactly PairKeepN/PairBatchN pairs (go
	// test, where the count is b.N).
	PairExactN bool
}

// DefaultParams are BENCHMARKS.md's canonical parameters, except that the
// timed workloads run 3 s instead of 5 s, as bench/c/run.sh does, to keep a
// 5-run suite near 16 minutes on 2 cores. The pair loops (not in
// BENCHMARKS.md) run 10 M pairs.
func DefaultParams() Params {
	return Params{
		LarsonSeconds: 3, LarsonChunks: 5000, LarsonRounds: 100, LarsonSeed: 4141,
		TTIterations: 1000, TTObjects: 10000, TTWork: 0, TTWords: 8,
		LSSize: 64, LSIterations: 2000000,
		CacheIterations: 1000, CacheObjSize: 1, CacheReps: 2000000,
		XMSeconds: 3, XMSize: 64, XMBatch: 4096, XMQueue: 100,
		PairKeepN: 10000000, PairBatchN: 10000000, PairSizes: []int{16, 64, 256, 4096},
		GorOps: 8000000, GorLife: 1000, GorCounts: []int{2, 64, 1000},
		GrowStart: 64, GrowMax: 80000000, GrowCycles: 50,
		FillBytes: 128 << 20, FillChurn: 2,
	}
}

// QuickParams cut every workload 5–10× (CI and tests).
func QuickParams() Params {
	p := DefaultParams()
	p.LarsonSeconds = 0.5
	p.TTIterations = 200
	p.LSIterations = 200000
	p.CacheReps = 200000
	p.XMSeconds = 0.5
	p.PairKeepN = 2000000
	p.PairBatchN = 2000000
	p.GorOps = 1000000
	p.GrowCycles = 5
	p.FillBytes = 16 << 20
	return p
}

// Env is one run of a workload.
type Env struct {
	Alloc   Allocator
	Threads int
	// OnStart and OnStop, when set, run just before and just after the timed
	// window (the runner samples CPU and GC counters there).
	OnStart, OnStop func()
}

func (e *Env) start() time.Time {
	if e.OnStart != nil {
		e.OnStart()
	}
	return time.Now()
}

func (e *Env) stopped() {
	if e.OnStop != nil {
		e.OnStop()
	}
}

// Result is what one run measured.
type Result struct {
	Value   float64 // in the workload's Metric
	Ops     int64   // alloc+free pairs (xmalloc-test: frees) in the timed window
	Elapsed time.Duration
	// HarnessBytes is the workload's own bookkeeping (slot arrays, batch
	// containers), which the memory measurement subtracts from RSS.
	HarnessBytes int64
}

// Workload is one benchmark, written once against the Allocator interface.
type Workload struct {
	Name           string // as in bench/results/c-anchors.csv where C has it
	Metric         string // Mops/s, M/s (higher is better); s, ns (lower)
	HigherIsBetter bool
	RemoteFrees    bool // frees cross goroutines
	SingleThreaded bool // runs on one goroutine whatever the thread count
	// Resources: the runner also tabulates user and system CPU time and peak
	// RSS (they are measured for every workload).
	Resources bool
	// Procs is the number of goroutines running at once with t threads; the
	// runner sets GOMAXPROCS to it, capped at the number of CPUs.
	Procs func(t int) int
	Run   func(*Env) Result
	About string
}

func same(t int) int  { return t }
func twice(t int) int { return 2 * t }
func one(int) int     { return 1 }

// Workloads returns every workload with parameters p.
func Workloads(p Params) []Workload {
	ws := []Workload{
		{Name: "larson-8-1000", Metric: "Mops/s", HigherIsBetter: true, RemoteFrees: true, Procs: same,
			Run:   func(e *Env) Result { return larson(e, p, 8, 1000) },
			About: "server simulation, objects of 8–1000 B, successors inherit the slots"},
		{Name: "larson-100-200", Metric: "Mops/s", HigherIsBetter: true, RemoteFrees: true, Procs: same,
			Run:   func(e *Env) Result { return larson(e, p, 100, 200) },
			About: "server simulation, objects of 100–200 B"},
		{Name: fmt.Sprintf("threadtest-%d", 8*p.TTWords), Metric: "s", Procs: same,
			Run:   func(e *Env) Result { return threadtest(e, p) },
			About: "each goroutine allocates objects/T objects then frees them, per iteration"},
		{Name: fmt.Sprintf("linux-scalability-%d", p.LSSize), Metric: "s", Procs: same,
			Run:   func(e *Env) Result { return linuxScalability(e, p) },
			About: "each goroutine allocates `iterations` objects (writing a byte of each) then frees them all"},
		{Name: "cache-thrash", Metric: "s", Procs: same,
			Run:   func(e *Env) Result { return cacheBench(e, p, false) },
			About: "active false sharing: per-goroutine objects written in a tight loop"},
		{Name: "cache-scratch", Metric: "s", RemoteFrees: true, Procs: same,
			Run:   func(e *Env) Result { return cacheBench(e, p, true) },
			About: "passive false sharing: first object allocated by main, freed remotely"},
		{Name: fmt.Sprintf("xmalloc-test-%d", p.XMSize), Metric: "M/s", HigherIsBetter: true, RemoteFrees: true, Procs: twice,
			Run:   func(e *Env) Result { return xmalloc(e, p) },
			About: "T producers allocate, T consumers free: every free is remote"},
	}
	ws = append(ws,
		Workload{Name: "grow-cycle", Metric: "s", SingleThreaded: true, Resources: true, Procs: one,
			Run: func(e *Env) Result { return growCycle(e, p) },
			About: fmt.Sprintf("Arrow-like: one goroutine grows a buffer by doubling from %d B to %s through Realloc "+
				"(alloc+copy+free without one; make+copy on the Go heap), touching every page it adds, frees it; %d cycles",
				p.GrowStart, sizeName(p.GrowMax), p.GrowCycles)},
		Workload{Name: "fill-mixed", Metric: "s", SingleThreaded: true, Procs: one,
			Run: func(e *Env) Result { return fillMixed(e, p) },
			About: fmt.Sprintf("one goroutine fills %s with objects of 16–4096 B and, one in 512, 64 KiB–2 MiB (every page "+
				"touched), replaces %d× their number at random, frees them all", sizeName(p.FillBytes), p.FillChurn)},
	)
	for _, g := range p.GorCounts {
		ws = append(ws, Workload{
			Name: fmt.Sprintf("goroutines-%d", g), Metric: "ns", SingleThreaded: true, RemoteFrees: true, Procs: func(int) int { return 2 },
			Run:   func(e *Env) Result { return goroutines(e, p, g) },
			About: fmt.Sprintf("%d goroutines at once on 2 Ps, each living %d alloc+free pairs (16–256 B, 8 kept) then handing its objects to a successor; ns per pair", g, p.GorLife),
		})
	}
	for _, mode := range []string{"keep1", "batch1000"} {
		for _, size := range p.PairSizes {
			n := p.PairKeepN
			if mode == "batch1000" {
				n = p.PairBatchN
			}
			// Sizes above 256 B run proportionally fewer pairs: zeroing (and,
			// for some peers, mmap) makes a 4 KiB pair up to 100× dearer.
			if !p.PairExactN {
				n = max(n/max(size/256, 1), 2*pairBatch)
			}
			ws = append(ws, Workload{
				Name: fmt.Sprintf("pair-%d-%s", size, mode), Metric: "ns", SingleThreaded: true, Procs: one,
				Run:   func(e *Env) Result { return pair(e, size, mode == "batch1000", n) },
				About: pairAbout[mode],
			})
		}
	}
	return ws
}

var pairAbout = map[string]string{
	"keep1":     "alloc, write a byte, free, on one goroutine, one other block kept live; ns per pair",
	"batch1000": "1000 allocs (a byte written in each), then 1000 frees in order, on one goroutine; ns per pair",
}

// sliceHeader is the size of a []byte in a workload's slot array.
const sliceHeader = 24

// ---------------------------------------------------------------- larson

type larsonSlot struct {
	array [][]byte
	rng   rng
	ops   int64
	_     [64]byte // the slots are written by different goroutines
}

func larson(env *Env, p Params, min, max int) Result {
	if max <= min || p.LarsonChunks < 1 || p.LarsonRounds < 1 {
		panic("larson: bad parameters")
	}
	T := env.Threads
	span := uint64(max - min)
	main := env.Alloc.Thread()

	// Setup (untimed): every slot of every thread, then a shuffle, so that
	// objects adjacent in memory go to different threads.
	all := make([][]byte, T*p.LarsonChunks)
	r := newRNG(p.LarsonSeed)
	for i := range all {
		b := main.Alloc(min + int(r.below(uint32(span))))
		b[0] = 'a'
		all[i] = b
	}
	for i := len(all) - 1; i > 0; i-- {
		j := int(r.next() % uint64(i+1))
		all[i], all[j] = all[j], all[i]
	}
	slots := make([]larsonSlot, T)
	for t := range slots {
		slots[t].array = all[t*p.LarsonChunks : (t+1)*p.LarsonChunks]
		slots[t].rng = newRNG(p.LarsonSeed*1000003 + uint64(t) + 1)
	}

	var stop atomic.Bool
	var wg sync.WaitGroup
	life := int64(p.LarsonRounds) * int64(p.LarsonChunks)
	limit := int64(-1)
	if p.LarsonOps > 0 {
		limit = (p.LarsonOps + int64(T) - 1) / int64(T)
	}
	var worker func(s *larsonSlot)
	worker = func(s *larsonSlot) {
		th := env.Alloc.Thread()
		a := s.array
		n := uint64(len(a))
		rr := s.rng
		ops := s.ops
		var i int64
		for i = 0; i < life; i++ {
			if stop.Load() || ops == limit {
				break
			}
			v := rr.next() % n
			th.Free(a[v])
			b := th.Alloc(min + int(rr.next()%span))
			b[0] = 'a'
			a[v] = b
			ops++
		}
		th.Close()
		s.rng, s.ops = rr, ops
		if i == life && !stop.Load() && ops != limit {
			// Hand the array to a successor: it frees what this goroutine
			// allocated (remote frees) and runs on a new Thread.
			go worker(s)
			return
		}
		wg.Done()
	}

	t0 := env.start()
	wg.Add(T)
	for t := range slots {
		go worker(&slots[t])
	}
	var d time.Duration
	if limit < 0 {
		time.Sleep(time.Duration(p.LarsonSeconds * float64(time.Second)))
		// Ops done after this instant, before the workers see the flag, are
		// at most one per worker.
		d = time.Since(t0)
		stop.Store(true)
		env.stopped()
		wg.Wait()
	} else {
		wg.Wait()
		d = time.Since(t0)
		env.stopped()
	}

	var ops int64
	for t := range slots {
		ops += slots[t].ops
	}
	for _, b := range all {
		main.Free(b)
	}
	main.Close()
	return Result{
		Value: float64(ops) / d.Seconds() / 1e6, Ops: ops, Elapsed: d,
		HarnessBytes: int64(len(all)) * sliceHeader,
	}
}

// ---------------------------------------------------------------- threadtest

// spin is the threadtest `work` busy loop; the sink keeps it from vanishing.
var spinSink atomic.Int64

func spin(n int) {
	s := int64(0)
	for i := 0; i < n; i++ {
		s += int64(i)
	}
	if s == -1 {
		spinSink.Store(s)
	}
}

// startGate runs body on T goroutines, each with its own Thread made before
// the clock starts, and times from releasing them to the last one's end.
func startGate(env *Env, body func(t int, th Thread)) time.Duration {
	T := env.Threads
	var ready, done sync.WaitGroup
	gate := make(chan struct{})
	ready.Add(T)
	done.Add(T)
	for t := range T {
		go func() {
			defer done.Done()
			th := env.Alloc.Thread()
			ready.Done()
			<-gate
			body(t, th)
			th.Close()
		}()
	}
	ready.Wait()
	t0 := env.start()
	close(gate)
	done.Wait()
	d := time.Since(t0)
	env.stopped()
	return d
}

func threadtest(env *Env, p Params) Result {
	T := env.Threads
	per := p.TTObjects / T
	if per < 1 || p.TTWords < 1 {
		panic("threadtest: bad parameters")
	}
	size := 8 * p.TTWords
	objs := make([][][]byte, T)
	for t := range objs {
		objs[t] = make([][]byte, per)
	}
	d := startGate(env, func(t int, th Thread) {
		o := objs[t]
		for range p.TTIterations {
			for i := range o {
				b := th.Alloc(size)
				for w := 0; w < p.TTWords; w++ {
					binary.LittleEndian.PutUint64(b[8*w:], uint64(w))
				}
				o[i] = b
				if p.TTWork > 0 {
					spin(p.TTWork)
				}
			}
			for i := range o {
				th.Free(o[i])
				if p.TTWork > 0 {
					spin(p.TTWork)
				}
			}
		}
	})
	ops := int64(T) * int64(per) * int64(p.TTIterations)
	return Result{Value: d.Seconds(), Ops: ops, Elapsed: d, HarnessBytes: int64(T*per) * sliceHeader}
}

// ---------------------------------------------------------------- linux-scalability

func linuxScalability(env *Env, p Params) Result {
	T := env.Threads
	objs := make([][][]byte, T)
	for t := range objs {
		objs[t] = make([][]byte, p.LSIterations)
	}
	d := startGate(env, func(t int, th Thread) {
		o := objs[t]
		for i := range o {
			// One byte written, which the original does not do: without it
			// fresh pages are never touched and the memory pass would see
			// less RSS than live bytes.
			b := th.Alloc(p.LSSize)
			b[0] = 1
			o[i] = b
		}
		for i := range o {
			th.Free(o[i])
		}
	})
	ops := int64(T) * int64(p.LSIterations)
	return Result{Value: d.Seconds(), Ops: ops, Elapsed: d, HarnessBytes: ops * sliceHeader}
}

// ---------------------------------------------------------------- cache-thrash, cache-scratch

// cacheSums receives each goroutine's read-back sum, one cache line apart.
type cacheSum struct {
	v uint64
	_ [56]byte
}

//go:noinline
func launder(b []byte) []byte { return b }

func cacheBench(env *Env, p Params, scratch bool) Result {
	T := env.Threads
	reps := p.CacheReps / T
	if reps < 1 || p.CacheObjSize < 1 {
		panic("cache bench: bad parameters")
	}
	size := p.CacheObjSize
	var main Thread
	handed := make([][]byte, T)
	if scratch {
		// T adjacent objects from one goroutine, each freed by another.
		main = env.Alloc.Thread()
		for t := range handed {
			handed[t] = main.Alloc(size)
		}
	}
	sums := make([]cacheSum, T)
	d := startGate(env, func(t int, th Thread) {
		if handed[t] != nil {
			th.Free(handed[t])
		}
		var sum uint64
		for range p.CacheIterations {
			obj := th.Alloc(size)
			// Read back through another slice header, as C reads through a
			// volatile pointer: the compiler cannot prove the two equal, so it
			// keeps the load instead of forwarding the stored byte.
			back := launder(obj)
			for range reps {
				for k := range obj {
					obj[k] = byte(k)
					sum += uint64(back[k])
				}
			}
			th.Free(obj)
		}
		sums[t].v = sum
	})
	if main != nil {
		main.Close()
	}
	return Result{Value: d.Seconds(), Ops: int64(T) * int64(p.CacheIterations), Elapsed: d}
}

// ---------------------------------------------------------------- xmalloc-test

type xbatch struct {
	obj [][]byte
	n   int
}

type paddedCount struct {
	n atomic.Int64
	_ [56]byte
}

func xmalloc(env *Env, p Params) Result {
	N := env.Threads
	if p.XMBatch < 1 || p.XMQueue < 1 {
		panic("xmalloc-test: bad parameters")
	}
	full := make(chan *xbatch, p.XMQueue)
	// Every container is in the pool, being filled, queued or being drained,
	// so queue+2N+1 never runs short; only the objects touch the allocator.
	ncont := p.XMQueue + 2*N + 1
	pool := make(chan *xbatch, ncont)
	for range ncont {
		pool <- &xbatch{obj: make([][]byte, p.XMBatch)}
	}
	stopCh := make(chan struct{})
	var budget atomic.Int64 // batches left to produce in count mode
	counted := p.XMFrees > 0
	if counted {
		budget.Store((p.XMFrees + int64(p.XMBatch) - 1) / int64(p.XMBatch))
	}
	counts := make([]paddedCount, N)
	var prod, cons sync.WaitGroup
	prod.Add(N)
	cons.Add(N)

	t0 := env.start()
	for c := range N {
		go func() {
			defer cons.Done()
			th := env.Alloc.Thread()
			var frees int64
			for b := range full {
				for i := range b.n {
					th.Free(b.obj[i])
				}
				frees += int64(b.n)
				counts[c].n.Store(frees)
				b.n = 0
				pool <- b
			}
			th.Close()
		}()
	}
	for range N {
		go func() {
			defer prod.Done()
			th := env.Alloc.Thread()
			defer th.Close()
			for {
				if counted && budget.Add(-1) < 0 {
					return
				}
				var b *xbatch
				select {
				case b = <-pool:
				case <-stopCh:
					return
				}
				for i := range b.obj {
					o := th.Alloc(p.XMSize)
					o[0] = byte(i)
					b.obj[i] = o
				}
				b.n = len(b.obj)
				select {
				case full <- b:
				case <-stopCh:
					// Stopping with the queue full: clean up, untimed.
					for i := range b.n {
						th.Free(b.obj[i])
					}
					b.n = 0
					pool <- b
					return
				}
			}
		}()
	}

	var d time.Duration
	var frees int64
	if !counted {
		time.Sleep(time.Duration(p.XMSeconds * float64(time.Second)))
		d = time.Since(t0)
		for c := range counts {
			frees += counts[c].n.Load()
		}
		close(stopCh)
		env.stopped()
		prod.Wait()
		close(full) // the consumers drain what is queued, uncounted
		cons.Wait()
	} else {
		prod.Wait()
		close(full)
		cons.Wait()
		d = time.Since(t0)
		env.stopped()
		for c := range counts {
			frees += counts[c].n.Load()
		}
	}
	return Result{
		Value: float64(frees) / d.Seconds() / 1e6, Ops: frees, Elapsed: d,
		HarnessBytes: int64(ncont) * int64(p.XMBatch) * sliceHeader,
	}
}

// ---------------------------------------------------------------- goroutines

// goroutines runs p.GorOps alloc+free pairs on g lanes at once (GOMAXPROCS 2):
// each lane is a chain of short-lived goroutines, each with a Thread of its
// own for p.GorLife pairs, on a ring of 8 objects of 16–256 B that it hands to
// its successor, which frees them. The number of goroutines made is the same
// for every g (GorOps/GorLife): only how many live at once changes, so the
// per-pair cost should not.
func goroutines(env *Env, p Params, g int) Result {
	if g < 1 || p.GorLife < 1 || p.GorOps < int64(g) {
		panic("goroutines: bad parameters")
	}
	per := p.GorOps / int64(g)
	var wg sync.WaitGroup
	var lane func(ring *[8][]byte, r rng, left int64)
	lane = func(ring *[8][]byte, r rng, left int64) {
		th := env.Alloc.Thread()
		n := min(int64(p.GorLife), left)
		for i := range n {
			j := i & 7
			if ring[j] != nil {
				th.Free(ring[j])
			}
			b := th.Alloc(16 + int(r.below(241)))
			b[0] = byte(i)
			ring[j] = b
		}
		if left -= n; left > 0 {
			th.Close()
			go lane(ring, r, left)
			return
		}
		for j := range ring {
			th.Free(ring[j])
			ring[j] = nil
		}
		th.Close()
		wg.Done()
	}
	rings := make([][8][]byte, g)
	t0 := env.start()
	wg.Add(g)
	for i := range g {
		go lane(&rings[i], newRNG(uint64(i)+1), per)
	}
	wg.Wait()
	d := time.Since(t0)
	env.stopped()
	ops := per * int64(g)
	return Result{Value: float64(d.Nanoseconds()) / float64(ops), Ops: ops, Elapsed: d,
		HarnessBytes: int64(g) * 8 * sliceHeader}
}

// ---------------------------------------------------------------- pair

// pairBatch is the batch size of the batch1000 mode.
const pairBatch = 1000

func pair(env *Env, size int, batch bool, n int) Result {
	th := env.Alloc.Thread()
	// One other block stays live, so that no loop empties a page (mimalloc's
	// slow path; BENCHMARKS.md).
	keep := th.Alloc(size)
	keep[0] = 1
	var a [][]byte
	run := pairKeep1
	if batch {
		a = make([][]byte, pairBatch)
		run = pairBatched
	}
	warm := max(n/10, pairBatch)
	run(th, size, warm, a)
	t0 := env.start()
	run(th, size, n, a)
	d := time.Since(t0)
	env.stopped()
	th.Free(keep)
	th.Close()
	return Result{Value: float64(d.Nanoseconds()) / float64(n), Ops: int64(n), Elapsed: d,
		HarnessBytes: int64(len(a)) * sliceHeader}
}

func pairKeep1(th Thread, size, n int, _ [][]byte) {
	for i := range n {
		p := th.Alloc(size)
		p[0] = byte(i)
		th.Free(p)
	}
}

func pairBatched(th Thread, size, n int, a [][]byte) {
	for n > 0 {
		b := a[:min(n, len(a))]
		for i := range b {
			p := th.Alloc(size)
			p[0] = byte(i)
			b[i] = p
		}
		for i := range b {
			th.Free(b[i])
		}
		n -= len(b)
	}
}

// sizeName prints a byte count as MB (decimal) or MiB, whichever is exact.
func sizeName(n int) string {
	switch {
	case n >= 1<<20 && n%(1<<20) == 0:
		return fmt.Sprintf("%d MiB", n>>20)
	case n >= 1e6 && n%1e6 == 0:
		return fmt.Sprintf("%d MB", n/1e6)
	}
	return fmt.Sprintf("%d B", n)
}

// pageSize is the stride at which the workloads touch memory.
const pageSize = 4096

// touch writes a byte in every page of b[from:].
func touch(b []byte, from int) {
	for i := from; i < len(b); i += pageSize {
		b[i] = 1
	}
	if len(b) > from {
		b[len(b)-1] = 1
	}
}

// ---------------------------------------------------------------- grow-cycle

// growCycle is what an Arrow builder does with its buffer, over and over:
// double it (Realloc: allocate the doubled size, copy, free the old one, or
// grow in place where the allocator can), write what it adds, and free it
// once the array is built. The kernel time and peak RSS are what it is about:
// an allocator that gives large buffers back to the OS on free faults their
// pages in again on every cycle.
func growCycle(env *Env, p Params) Result {
	if p.GrowStart < 1 || p.GrowMax < p.GrowStart || p.GrowCycles < 1 {
		panic("grow-cycle: bad parameters")
	}
	th := env.Alloc.Thread()
	var steps int64
	t0 := env.start()
	for range p.GrowCycles {
		n := p.GrowStart
		b := th.Alloc(n)
		touch(b, 0)
		for n < p.GrowMax {
			old := n
			n = min(2*n, p.GrowMax)
			b = Realloc(th, b, n)
			touch(b, old)
			steps++
		}
		th.Free(b)
	}
	d := time.Since(t0)
	env.stopped()
	th.Close()
	return Result{Value: d.Seconds(), Ops: steps, Elapsed: d}
}

// ---------------------------------------------------------------- fill-mixed

// fillSeed is fill-mixed's PRNG seed.
const fillSeed = 12

// fillSize draws one object size of fill-mixed: 16–4096 B, or one time in 512
// 64 KiB–2 MiB (large objects then hold about half the bytes).
func fillSize(r *rng) int {
	if r.below(512) == 0 {
		return 64<<10 + int(r.below(2<<20-64<<10+1))
	}
	return 16 + int(r.below(4096-16+1))
}

// fillMixed measures memory for a large live set of mixed sizes: peak RSS over
// peak live, where small-object fragmentation and large-object rounding both
// count.
func fillMixed(env *Env, p Params) Result {
	if p.FillBytes < 1 || p.FillChurn < 0 {
		panic("fill-mixed: bad parameters")
	}
	// How many objects the fill takes, from the same draws, so that the slot
	// array is allocated once and exactly (it counts as harness).
	r := newRNG(fillSeed)
	count := 0
	for live := 0; live < p.FillBytes; count++ {
		live += fillSize(&r)
	}
	objs := make([][]byte, count)
	th := env.Alloc.Thread()
	r = newRNG(fillSeed)
	t0 := env.start()
	for i := range objs {
		b := th.Alloc(fillSize(&r))
		touch(b, 0)
		objs[i] = b
	}
	churn := p.FillChurn * count
	for range churn {
		j := r.below(uint32(count))
		th.Free(objs[j])
		b := th.Alloc(fillSize(&r))
		touch(b, 0)
		objs[j] = b
	}
	for i := range objs {
		th.Free(objs[i])
		objs[i] = nil
	}
	d := time.Since(t0)
	env.stopped()
	th.Close()
	return Result{Value: d.Seconds(), Ops: int64(count + churn), Elapsed: d, HarnessBytes: int64(count) * sliceHeader}
}
