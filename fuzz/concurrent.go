// Concurrent programs: the bytes choose a schedule for several goroutines.

package fuzz

import (
	"errors"
	"math/rand/v2"

	"github.com/refalloc/refalloc/impl"
	"github.com/refalloc/refalloc/internal/mutant"
	"github.com/refalloc/refalloc/invariants"
	"github.com/refalloc/refalloc/spec"
)

// Workers is the number of goroutines a concurrent program drives.
const Workers = 3

// StepSize is the size of one step of a concurrent program: who, op, a, b.
const StepSize = 4

// Concurrent step operations (op % NumCOps).
const (
	COpAlloc     = iota // who allocates a size chosen by a, b
	COpFree             // who frees one of its objects (a picks)
	COpSend             // who hands one of its objects (a picks) to worker b
	COpReceive          // who frees an object it was handed
	COpFlush            // who flushes its cache
	COpReopen           // who closes its cache and opens a new one
	COpBurst            // every worker runs a random ops at once, seeded by b
	COpBarrier          // all idle: check a snapshot (after a full flush when a is odd)
	COpStale            // who frees what it no longer holds (a picks which kind, b which)
	COpAllocator        // who calls Allocator.Flush, Trim or Stats (a picks)
	NumCOps
)

type cworker struct {
	sh    *invariants.Shared
	c     *impl.Cache
	id    int
	mine  []invariants.SharedObj
	inbox chan invariants.SharedObj
	run   chan func()
	done  chan struct{}
	fill  byte
	freed [][]byte // recently freed, for stale frees
	n     concCounts
}

// concCounts counts what a concurrent program's steps made.
type concCounts struct {
	Front int // allocations through the Allocator's methods
	Large int // large allocations
	Stale int // stale frees of an address freed before
	Burst int // operations run in bursts, all workers at once
	// BurstAllocator counts the Allocator's methods (COpAllocator) called
	// in bursts, while the other workers run.
	BurstAllocator int
	Reopen         int // caches closed (and another opened) mid-run
	StaleFront     int // stale frees through the Allocator's methods
	Handoff        int // objects handed to another worker (COpSend)
	FrontOOM       int // out-of-memory of the Allocator's Alloc judged by CheckOOM
}

// concEnd, if set (tests), is told at the end of RunConcurrent, when every
// object is freed and every cache closed, before the EMPTY check and the
// Allocator's Close, of the Shared it ran on and of what the driver reached.
var concEnd func(sh *invariants.Shared, n concCounts)

// concurrentOptions is the configuration a concurrent program's header
// selects.
func concurrentOptions(data []byte) impl.Options {
	opt := impl.Options{Reserve: 32 * spec.SuperblockSize}
	if len(data) > 0 {
		// Header: bits 0-1 the superblock-cache ways (with bit 5, 64 or
		// 128 by bit 0), bit 2 debug mode, bit 3 guard mode (GUARD-FAULT),
		// every small allocation sampled, or one in 3 with bit 4; bit 6 a
		// pool that returns memory at every release past Retain (MEM-ACCOUNT:
		// Decay -1), a Retain of 2 superblocks, or none with bit 7.
		opt.SuperblockCacheWays = []int{16, 1, 8, 32}[data[0]&3]
		if data[0]&32 != 0 {
			opt.SuperblockCacheWays = []int{64, 128}[data[0]&1]
			if mutant.ConcWays128 {
				opt.SuperblockCacheWays = 64
			}
		}
		opt.Debug = data[0]&4 != 0
		if data[0]&8 != 0 && !mutant.ConcGuard {
			opt.Guard = impl.GuardOptions{Enabled: true, SampleRate: []int{1, 3}[data[0]>>4&1]}
		}
		if data[0]&64 != 0 {
			opt.Retain, opt.Decay = []int{2 * spec.SuperblockSize, -1}[data[0]>>7], -1
		}
	}
	return opt
}

// RunConcurrent runs a concurrent program: Workers goroutines, each with its own
// cache, execute the steps one at a time in the order the bytes give (a
// deterministic interleaving of real goroutines, so every handoff makes real
// cross-goroutine remote frees), except bursts, where all of them run at once.
// The Model is updated in the safe order (invariants.Shared); barriers check a
// snapshot, and the end checks EMPTY. It returns the first violation.
func RunConcurrent(data []byte) error {
	sh, err := invariants.NewShared(concurrentOptions(data))
	if err != nil {
		return err
	}
	ws := make([]*cworker, Workers)
	for i := range ws {
		w := &cworker{sh: sh, inbox: make(chan invariants.SharedObj, 1024), run: make(chan func()), done: make(chan struct{})}
		if w.c, w.id, err = sh.OpenCache(); err != nil {
			return err
		}
		go w.loop()
		ws[i] = w
	}
	on := func(w *cworker, f func()) { w.run <- f; <-w.done }
	if len(data) > 0 {
		data = data[1:]
	}
	for ; len(data) >= StepSize; data = data[StepSize:] {
		w, op, a, b := ws[int(data[0])%(Workers-b2i(mutant.ConcWorkerLastNever))], int(data[1])%NumCOps, int(data[2]), int(data[3])
		switch op {
		case COpBurst:
			for i, x := range ws {
				x.run <- func() { x.burst(ws, a%32, uint64(b)<<8|uint64(i)) }
			}
			for _, x := range ws {
				<-x.done
			}
		case COpBarrier:
			if a&1 != 0 {
				for _, x := range ws {
					x.c.Flush() // every worker is idle: the channels order these
				}
				sh.A.Flush()
			}
			sh.Check(a&1 != 0 && !mutant.ConcNoExact)
			for _, x := range ws {
				x.keepAlive()
			}
		default:
			on(w, func() { w.do(ws, op, a, b, true) })
		}
		if len(sh.Violations()) > 0 {
			break
		}
	}
	if len(sh.Violations()) == 0 {
		sh.Check(false) // settle the stale frees before everything is freed
		for _, x := range ws {
			x.keepAlive()
		}
	}
	for _, w := range ws {
		on(w, w.freeAll)
	}
	for _, w := range ws {
		on(w, func() { w.sh.CloseCache(w.c, w.id) })
		close(w.run)
	}
	sh.A.Flush()
	sh.Settle()
	if concEnd != nil {
		var n concCounts
		for _, w := range ws {
			n.Front += w.n.Front
			n.Large += w.n.Large
			n.Stale += w.n.Stale
			n.Burst += w.n.Burst
			n.BurstAllocator += w.n.BurstAllocator
			n.Reopen += w.n.Reopen
			n.StaleFront += w.n.StaleFront
			n.Handoff += w.n.Handoff
			n.FrontOOM += w.n.FrontOOM
		}
		concEnd(sh, n)
	}
	if !mutant.ConcNoEmpty {
		sh.Record(invariants.CheckEmpty(sh.A.Snapshot(), sh.M)...)
	}
	sh.Close()
	var errs []error
	for _, v := range sh.Violations() {
		errs = append(errs, v)
	}
	return errors.Join(errs...)
}

// keepAlive drops the objects a stale free freed under the worker (after a
// barrier settled them); every worker is idle.
func (w *cworker) keepAlive() {
	var mine []invariants.SharedObj
	for _, o := range w.mine {
		if w.sh.Alive(o) {
			mine = append(mine, o)
		}
	}
	w.mine = mine
	var kept []invariants.SharedObj
	for len(w.inbox) > 0 {
		if o := <-w.inbox; w.sh.Alive(o) {
			kept = append(kept, o)
		}
	}
	for _, o := range kept {
		w.inbox <- o
	}
}

func (w *cworker) loop() {
	for f := range w.run {
		f()
		w.done <- struct{}{}
	}
}

// do runs one operation. alone says the other workers are idle, so that an
// out-of-memory can be judged against a snapshot (OOM-REAL).
func (w *cworker) do(ws []*cworker, op, a, b int, alone bool) {
	switch op {
	case COpAlloc:
		n := concSize(a, b)
		if n > spec.MaxSmall {
			w.n.Large++
		}
		w.fill++
		var c *impl.Cache
		if b&1 == 0 || mutant.ConcNoFront {
			c = w.c // else the Allocator's methods
		} else {
			w.n.Front++
		}
		if o, ok := w.sh.Alloc(c, w.id, n, 1, w.fill|1); ok {
			w.mine = append(w.mine, o)
		} else if alone && !(mutant.ConcFrontOOMUnjudged && c == nil) { // OOM-REAL: the Allocator's out-of-memory unjudged
			snap := w.sh.A.Snapshot()
			ids := []int{w.id}
			if c == nil {
				ids = nil // the front's caches: any of them
				w.n.FrontOOM++
				for _, fc := range snap.Caches {
					if fc.Front {
						ids = append(ids, fc.ID)
					}
				}
			}
			w.sh.Record(invariants.CheckOOM(snap, ids, n, 1)...)
		}
	case COpFree:
		if len(w.mine) > 0 {
			w.freeMine(a%len(w.mine), b&1 != 0)
		}
	case COpSend:
		if len(w.mine) > 0 {
			i := a % len(w.mine)
			to := ws[b%len(ws)]
			if mutant.ConcSendSelf { // CACHE-COHERENT: no object reaches another worker
				to = w
			}
			select {
			case to.inbox <- w.mine[i]:
				w.mine = append(w.mine[:i], w.mine[i+1:]...)
				if to != w {
					w.n.Handoff++
				}
			default:
			}
		}
	case COpReceive:
		select {
		case o := <-w.inbox:
			w.free(o, b&1 != 0)
		default:
		}
	case COpFlush:
		w.c.Flush()
	case COpReopen:
		if mutant.ConcNoReopen {
			w.c.Flush()
			break
		}
		w.sh.CloseCache(w.c, w.id)
		w.n.Reopen++
		var err error
		if w.c, w.id, err = w.sh.OpenCache(); err != nil {
			panic(err)
		}
	case COpStale:
		// An address freed before, a double free right after a free, or a
		// pointer inside an object held: judged per address at the barrier.
		var p []byte
		switch {
		case a%3 == 0 && len(w.freed) > 0 && !mutant.ConcNoStaleFreed:
			p = w.freed[b%len(w.freed)]
			w.n.Stale++
		case a%3 == 1 && len(w.mine) > 0:
			i := b % len(w.mine)
			p = w.mine[i].B
			w.freeMine(i, false)
		case len(w.mine) > 0:
			if o := w.mine[b%len(w.mine)].B; cap(o) >= 32 {
				p = o[:cap(o)][16*(1+a%(cap(o)/16-1)):]
			}
		}
		if p != nil {
			var c *impl.Cache
			if b&1 == 0 || mutant.ConcStaleNoFront {
				c = w.c
			} else {
				w.n.StaleFront++
			}
			w.sh.StaleFree(c, w.id, p)
		}
	case COpAllocator:
		switch a % 3 {
		case 0:
			w.sh.A.Flush()
		case 1:
			if err := w.sh.A.Trim(); err != nil {
				panic(err)
			}
		case 2:
			w.sh.Record(invariants.StatsNow(w.sh.A.Stats())...)
		}
	}
}

// concSize is the size a COpAlloc with bytes a and b asks for: any size from 0
// to MaxSmall, or, when b's top two bits are set, a large one from MaxSmall+1.
func concSize(a, b int) int {
	n := (a | b<<8) % (spec.MaxSmall + 1)
	if mutant.ConcSizeMaxSmall {
		n = (a | b<<8) % spec.MaxSmall
	}
	if b&0xc0 == 0xc0 && !mutant.ConcNoLarge {
		n = spec.MaxSmall + 1 + a*512
	}
	return n
}

func (w *cworker) freeMine(i int, front bool) {
	o := w.mine[i]
	w.mine = append(w.mine[:i], w.mine[i+1:]...)
	w.free(o, front)
}

// free frees o through the worker's cache, or the Allocator's methods.
func (w *cworker) free(o invariants.SharedObj, front bool) {
	c := w.c
	if front {
		c = nil
	}
	w.sh.Free(c, w.id, o)
	if len(w.freed) == 8 {
		w.freed = w.freed[1:]
	}
	w.freed = append(w.freed, o.B)
}

// burst runs n random operations while the other workers do the same.
func (w *cworker) burst(ws []*cworker, n int, seed uint64) {
	rng := rand.New(rand.NewPCG(seed, 7))
	if mutant.ConcNoBurst {
		n = 0
	}
	for range n {
		w.n.Burst++
		op := []int{COpAlloc, COpAlloc, COpFree, COpSend, COpReceive, COpReceive, COpStale, COpAllocator}[rng.IntN(8-b2i(mutant.ConcBurstNoAllocator))]
		if op == COpAllocator && rng.IntN(4) != 0 {
			op = COpAlloc
		}
		if op == COpAllocator {
			w.n.BurstAllocator++
		}
		w.do(ws, op, rng.IntN(256), rng.IntN(192), false)
	}
}

// freeAll frees what the worker owns and was handed; RunConcurrent calls it
// after the last step, when nobody sends any more.
func (w *cworker) freeAll() {
	for len(w.mine) > 0 {
		w.freeMine(len(w.mine)-1, false)
	}
	for {
		select {
		case o := <-w.inbox:
			w.free(o, false)
		default:
			return
		}
	}
}
