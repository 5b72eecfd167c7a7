//go:build refalloc_yield

// Explore: goroutines run one segment at a time, the schedule chosen at every
// yield point inside impl, so that a race inside an operation replays exactly.

package invariants

import (
	"fmt"
	"runtime"
	"strings"
	"time"

	"github.com/refalloc/refalloc/impl"
	"github.com/refalloc/refalloc/internal/mutant"
	"github.com/refalloc/refalloc/spec"
)

// Chooser is where an exploration takes every decision from: the operations of
// each round and which goroutine goes on at each yield point. The same choices
// replay the same run exactly.
type Chooser interface {
	// Intn returns a number in [0, n); label names the decision.
	Intn(n int, label string) int
}

// ExploreConfig configures Explore.
type ExploreConfig struct {
	Workers int // goroutines, each with its own Cache: 2 to 4
	Rounds  int // rounds of operations; each ends at a quiescent point that is checked
	Options impl.Options
	// Sizes are the request sizes the operations draw from: few classes and a
	// small reservation make superblocks change class and owner all the time.
	Sizes []int
	// MaxSwitches bounds the yield points per round at which the schedule may
	// switch goroutines; past it, each goroutine runs on to its next lock wait
	// or the end of its operations.
	MaxSwitches int
	// SwitchOdds: at a yield point the schedule switches goroutines one time
	// in SwitchOdds [6].
	SwitchOdds int
	// Watchdog fails a round that makes no progress for this long [60s].
	Watchdog time.Duration
	// atCheck, if set (tests), runs at each round's quiescent point, before
	// its check.
	atCheck func(*Shared)
}

// DrawExploreConfig draws a configuration from ch: 2 to 4 workers, a
// reservation of 4 to 8 superblocks, two or three sizes (small classes and a
// large object) so that superblocks change class, owner and kind all the time,
// every way count, debug mode in a third of the runs, memory kept or returned,
// at once or later.
func DrawExploreConfig(ch Chooser) ExploreConfig {
	menu := []int{48, 64, 100, 1024, 2048, 4096, spec.MaxSmall, 70_000}
	var sizes []int
	for range 2 + ch.Intn(2, "sizes") {
		sizes = append(sizes, menu[ch.Intn(len(menu), "size menu")])
	}
	workers := 2 + ch.Intn(3, "workers")
	if mutant.ExploreWorkers4 {
		workers = min(workers, 3)
	}
	return ExploreConfig{
		Workers: workers,
		Rounds:  20,
		Options: impl.Options{
			Reserve:             (4 + ch.Intn(5, "superblocks")) * spec.SuperblockSize,
			SuperblockCacheWays: []int{1, 8, 16, 32, 64, 128}[ch.Intn(6, "ways")],
			Debug:               ch.Intn(3, "debug") == 0,
			Retain:              []int{0, -1}[ch.Intn(2, "retain")],
			// the default (1 s, by a timer, which seldom fires in a round:
			// MEM-ACCOUNT's judge gives it twice its decay) or at once
			Decay: []time.Duration{0, -1}[ch.Intn(2, "decay")],
		},
		Sizes:       sizes,
		MaxSwitches: 64,
	}
}

// ExploreResult is what an exploration did and found.
type ExploreResult struct {
	// Steps counts the scheduling decisions: yield points reached, and ends of
	// a worker's operations.
	Rounds, Ops, Switches, Steps int
	// Flushed counts the rounds checked after every cache was flushed
	// (STATS-EXACT: Shared.Check of a flushed snapshot).
	Flushed    int
	Violations []*Violation
	// Trace is the schedule of the first failing round: "worker: yield point"
	// per step, with the operations each worker ran.
	Trace string
}

// maxStalls is how many times in a row a round lets a worker try a lock again
// when every worker waits for one, a millisecond apart, before it fails.
const maxStalls = 100

// explorer is the impl.Scheduler: one worker runs at a time; at a yield point
// it tells the main goroutine where it is and waits, and the main goroutine,
// which takes every decision from the chooser, says who goes on.
type explorer struct {
	ch       Chooser
	cfg      ExploreConfig
	workers  []*eworker
	cur      *eworker
	inRound  bool
	switches int
	steps    int
	trace    []string
	events   chan event
	gids     map[uint64]*eworker // the workers by goroutine ID, fixed before the first round
}

// event is what the running worker tells the main goroutine.
type event struct {
	w      *eworker
	point  string // a yield point, or "" when its operations ended
	failed any    // a panic on the worker, with stack
}

type eworker struct {
	idx   int
	wake  chan struct{}
	start chan []eop
	ended bool
	// the driver's state, touched only by the worker while it runs and by the
	// main goroutine between rounds
	c     *impl.Cache
	id    int
	mine  []SharedObj
	freed [][]byte // recently freed, for stale frees
	fill  byte
}

type eop struct {
	name string
	run  func()
}

// Yield is impl.Scheduler.Yield, called by the running worker. A goroutine
// that is not a worker (the decay timer's, the main goroutine between rounds)
// is not scheduled: it goes on, and at a busy lock (lock.wait) tries again.
func (x *explorer) Yield(point string) {
	w := x.gids[goid()]
	if mutant.ExploreSchedulesOthers && x.inRound {
		w = x.cur
	}
	if w == nil {
		runtime.Gosched()
		return
	}
	if !x.inRound {
		return
	}
	x.events <- event{w: w, point: point}
	<-w.wake
}

// Bucket is impl.Scheduler.Bucket: each worker has its own front bucket.
func (x *explorer) Bucket() uint32 { return uint32(x.cur.idx) }

func (x *explorer) loop(w *eworker, gids chan<- uint64) {
	gids <- goid()
	for ops := range w.start {
		<-w.wake
		func() {
			defer func() {
				if r := recover(); r != nil {
					buf := make([]byte, 64<<10)
					x.events <- event{w: w, failed: fmt.Sprintf("%v\n%s", r, buf[:runtime.Stack(buf, false)])}
				}
			}()
			for i, op := range ops {
				if i > 0 {
					x.Yield("op")
				}
				x.trace = append(x.trace, fmt.Sprintf("%d: %s", w.idx, op.name))
				op.run()
			}
			x.events <- event{w: w}
		}()
	}
}

// round runs one round's plans to their end: at every event the chooser picks
// the worker that goes on (while the round may still switch; a worker at a
// busy lock always gives way). It fails on a panic in a worker, or when no
// worker reaches a yield point within the watchdog's time, with every
// goroutine's stack.
func (x *explorer) round(plans [][]eop) error {
	x.trace, x.switches, x.steps = x.trace[:0], 0, 0
	var runnable []*eworker
	for i, w := range x.workers {
		w.ended = len(plans[i]) == 0
		if !w.ended {
			runnable = append(runnable, w)
		}
	}
	if len(runnable) == 0 {
		return nil
	}
	x.inRound = true
	defer func() { x.inRound = false }()
	for i, w := range x.workers {
		if !w.ended {
			w.start <- plans[i]
		}
	}
	x.cur = runnable[x.ch.Intn(len(runnable), "who")]
	x.cur.wake <- struct{}{}
	waiting := map[*eworker]bool{}
	at := map[*eworker]string{} // the yield point each worker is paused at
	stalls := 0                 // times in a row that every worker waited for a lock
	for {
		var ev event
		select {
		case ev = <-x.events:
		case <-time.After(x.cfg.Watchdog):
			buf := make([]byte, 1<<20)
			buf = buf[:runtime.Stack(buf, true)]
			return fmt.Errorf("explore: no yield point for %v in a round; schedule so far:\n%s\ngoroutines:\n%s",
				x.cfg.Watchdog, strings.Join(x.trace, "\n"), buf)
		}
		if ev.failed != nil {
			return fmt.Errorf("explore: worker %d panicked: %v\nschedule:\n%s", ev.w.idx, ev.failed, strings.Join(x.trace, "\n"))
		}
		x.steps++
		if ev.point == "" {
			ev.w.ended = true
		} else {
			x.trace = append(x.trace, fmt.Sprintf("%d: %s", ev.w.idx, ev.point))
		}
		// A worker at a busy lock waits until another makes progress:
		// choosing among the waiters alone would let two of them take turns
		// failing to lock while the holder never runs. A worker that ran from
		// anywhere but a failed lock attempt may have released a lock.
		if ev.point != impl.YieldLockWait || at[ev.w] != impl.YieldLockWait {
			clear(waiting)
			stalls = 0
		}
		if ev.point == impl.YieldLockWait {
			waiting[ev.w] = true
		}
		at[ev.w] = ev.point
		runnable = runnable[:0]
		for _, w := range x.workers {
			if !w.ended && !waiting[w] {
				runnable = append(runnable, w)
			}
		}
		switch {
		case len(runnable) == 0 && ev.point == "":
			return nil // every worker ended
		case len(runnable) == 0 && stalls < maxStalls && !mutant.ExploreNoStalls:
			// A goroutine the explorer does not schedule (the decay timer's)
			// may hold the lock for an instant: the waiter tries again.
			stalls++
			time.Sleep(time.Millisecond)
			runnable = append(runnable, ev.w)
		case len(runnable) == 0:
			buf := make([]byte, 1<<20)
			buf = buf[:runtime.Stack(buf, true)]
			return fmt.Errorf("explore: every worker waits for a lock\n%s\ngoroutines:\n%s", strings.Join(x.trace, "\n"), buf)
		}
		// Most yield points let the worker go on: a race needs one goroutine
		// to stop in a window while another runs whole operations, which
		// switching at every point would make exponentially rare.
		next := ev.w
		switch {
		case ev.point == "" || ev.point == impl.YieldLockWait:
			next = runnable[x.ch.Intn(len(runnable), "who")]
		case x.switches < x.cfg.MaxSwitches && x.ch.Intn(x.cfg.SwitchOdds, "switch?") == 0:
			next = runnable[x.ch.Intn(len(runnable), "to")]
		}
		if next != ev.w {
			x.switches++
		}
		x.cur = next
		next.wake <- struct{}{}
	}
}

// newExplorer starts cfg.Workers workers, each with a cache of sh's.
func newExplorer(ch Chooser, cfg ExploreConfig, sh *Shared) (*explorer, error) {
	x := &explorer{ch: ch, cfg: cfg, events: make(chan event), gids: map[uint64]*eworker{}}
	gids := make(chan uint64)
	for i := range cfg.Workers {
		w := &eworker{idx: i, wake: make(chan struct{}), start: make(chan []eop)}
		var err error
		if w.c, w.id, err = sh.OpenCache(); err != nil {
			return nil, err
		}
		x.workers = append(x.workers, w)
		go x.loop(w, gids)
		x.gids[<-gids] = w
	}
	return x, nil
}

// Explore runs cfg.Workers goroutines against one Allocator and the Model
// (through Shared), round by round. Each round the chooser gives every worker
// one to three operations: allocations through its Cache or the Allocator,
// frees of its objects through any cache, stale and double frees of addresses
// freed before (racing their reuse), frees inside live objects, flushes, cache
// close and reopen (orphans, adoption), Allocator.Flush and Trim. The workers
// then run one segment at a time: at every yield point in impl (and between
// operations) the chooser picks which one goes on. At the end of each round,
// a quiescent point, the calls are judged (Shared.Check: the per-address
// judgment of the stale frees, every live object's bytes, every invariant).
// At the end everything is freed and EMPTY checked.
func Explore(ch Chooser, cfg ExploreConfig) (*ExploreResult, error) {
	if cfg.Watchdog <= 0 {
		cfg.Watchdog = 60 * time.Second
	}
	if cfg.SwitchOdds <= 0 {
		cfg.SwitchOdds = 6
	}
	sh, err := NewShared(cfg.Options)
	if err != nil {
		return nil, err
	}
	x, err := newExplorer(ch, cfg, sh)
	if err != nil {
		return nil, err
	}
	impl.SetScheduler(x)
	defer impl.SetScheduler(nil)
	res := &ExploreResult{}
	for r := 0; r < cfg.Rounds && len(sh.Violations()) == 0; r++ {
		plans := x.raceRound(sh)
		for i, w := range x.workers {
			if plans[i] == nil {
				for range 1 + ch.Intn(3, "ops") {
					plans[i] = append(plans[i], x.plan(sh, w))
				}
			}
			res.Ops += len(plans[i])
		}
		if err := x.round(plans); err != nil {
			return res, err
		}
		res.Rounds++
		res.Switches += x.switches
		res.Steps += x.steps
		flushed := ch.Intn(4, "flushed?") == 0 && !mutant.ExploreNoFlushed
		if flushed {
			x.flushAll(sh)
		}
		if cfg.atCheck != nil {
			cfg.atCheck(sh)
		}
		if mutant.ExploreCheckUnflushed { // STATS-EXACT: a flushed round checked as if it were not
			sh.Check(false)
		} else {
			sh.Check(flushed)
		}
		res.Flushed = sh.ExactChecks() // the rounds really checked as flushed
		for _, w := range x.workers {
			w.mine = alive(sh, w.mine)
		}
		if vs := sh.Violations(); len(vs) > 0 && !mutant.ExploreViolationsLast { // the violations taken at the end, with no trace
			res.Violations = vs
			res.Trace = x.describe(plans)
		}
	}
	if len(res.Violations) == 0 {
		for _, w := range x.workers {
			for _, o := range w.mine {
				sh.Free(w.c, w.id, o)
			}
			w.mine = nil
			sh.CloseCache(w.c, w.id)
		}
		sh.A.Flush()
		sh.Settle()
		sh.Record(CheckEmpty(sh.A.Snapshot(), sh.M)...)
		res.Violations = sh.Violations()
	}
	for _, w := range x.workers {
		close(w.start)
	}
	sh.Close()
	if len(res.Violations) == 0 {
		res.Violations = sh.Violations()
	}
	return res, nil
}

// flushAll flushes every cache at a quiescent point (for STATS-EXACT).
func (x *explorer) flushAll(sh *Shared) {
	for _, w := range x.workers {
		w.c.Flush()
	}
	sh.A.Flush()
}

func (x *explorer) describe(plans [][]eop) string {
	var b strings.Builder
	for i, p := range plans {
		fmt.Fprintf(&b, "worker %d:", i)
		for _, op := range p {
			fmt.Fprintf(&b, " %s;", op.name)
		}
		b.WriteString("\n")
	}
	b.WriteString("schedule:\n")
	b.WriteString(strings.Join(x.trace, "\n"))
	return b.String()
}

// raceRound, one round in three, sets a stale free against the reuse of its
// superblock: one worker frees a pointer it freed before, while another frees
// every object it holds in that superblock (which may release it, or adopt
// it if it is an orphan), allocates (which may carve it for another class, or
// make it part of a large object) and may close its cache (orphaning it
// again). The other workers' plans are drawn as usual (nil).
func (x *explorer) raceRound(sh *Shared) [][]eop {
	plans := make([][]eop, len(x.workers))
	if x.ch.Intn(3, "race round?") != 0 {
		return plans
	}
	p := x.workers[x.ch.Intn(len(x.workers), "stale freer")]
	q := x.workers[x.ch.Intn(len(x.workers), "reuser")]
	if len(p.freed) == 0 || p == q {
		return plans
	}
	stale := p.freed[x.ch.Intn(len(p.freed), "stale")]
	sb := (addr(stale) - sh.M.Base()) >> spec.SuperblockShift
	var mine []SharedObj
	for i := 0; i < len(q.mine); {
		if o := q.mine[i]; (addr(o.B)-sh.M.Base())>>spec.SuperblockShift == sb {
			mine = append(mine, o)
			q.mine = append(q.mine[:i], q.mine[i+1:]...)
		} else {
			i++
		}
	}
	plans[p.idx] = []eop{{fmt.Sprintf("stale free %#x", addr(stale)), func() { sh.StaleFree(p.c, p.id, stale) }}}
	n := x.cfg.Sizes[x.ch.Intn(len(x.cfg.Sizes), "size")]
	q.fill++
	fill := q.fill | 1
	plans[q.idx] = []eop{
		{fmt.Sprintf("free %d objects of superblock %d", len(mine), sb), func() {
			for _, o := range mine {
				sh.Free(q.c, q.id, o)
				q.remember(o.B)
			}
		}},
	}
	if x.ch.Intn(2, "release?") == 0 { // a current superblock is released only at a flush
		plans[q.idx] = append(plans[q.idx], eop{"flush", func() { q.c.Flush() }})
	}
	plans[q.idx] = append(plans[q.idx], eop{fmt.Sprintf("alloc %d", n), func() {
		if o, ok := sh.Alloc(q.c, q.id, n, 1, fill); ok {
			q.mine = append(q.mine, o)
		}
	}})
	if x.ch.Intn(2, "orphan?") == 0 {
		plans[q.idx] = append(plans[q.idx], x.closeReopen(sh, q))
	}
	return plans
}

func (x *explorer) closeReopen(sh *Shared, w *eworker) eop {
	return eop{"close and reopen", func() {
		sh.CloseCache(w.c, w.id)
		c, id, err := sh.OpenCache()
		if err != nil {
			sh.Record(violation(spec.RuleRefines, "NewCache: %v", err))
			return
		}
		w.c, w.id = c, id
	}}
}

// plan draws one operation for w, between rounds; it runs in the round, on
// w's goroutine, through w's cache as it is then (a close and reopen before it
// in the round changes it).
func (x *explorer) plan(sh *Shared, w *eworker) eop {
	size := func() int { return x.cfg.Sizes[x.ch.Intn(len(x.cfg.Sizes), "size")] }
	front := x.ch.Intn(4, "front?") == 0 // the Allocator's methods, not w's cache
	via := func() (*impl.Cache, int) {
		if front {
			return nil, Front
		}
		return w.c, w.id
	}
	name := func(s string) string {
		if front {
			return s + " by the Allocator"
		}
		return s
	}
	// An object w holds, taken out of its list now so that no other operation
	// of the round frees it as its holder.
	take := func() (SharedObj, bool) {
		if len(w.mine) == 0 {
			return SharedObj{}, false
		}
		i := x.ch.Intn(len(w.mine), "object")
		o := w.mine[i]
		w.mine = append(w.mine[:i], w.mine[i+1:]...)
		return o, true
	}
	ops := 13
	if mutant.ExploreNoTrim {
		ops = 12
	}
	switch op := x.ch.Intn(ops, "op"); {
	case op < 4:
		n := size()
		w.fill++
		fill := w.fill | 1
		return eop{name(fmt.Sprintf("alloc %d", n)), func() {
			c, id := via()
			if o, ok := sh.Alloc(c, id, n, 1, fill); ok {
				w.mine = append(w.mine, o)
			}
		}}
	case op < 6:
		if o, ok := take(); ok {
			return eop{name(fmt.Sprintf("free %#x", addr(o.B))), func() {
				c, id := via()
				sh.Free(c, id, o)
				w.remember(o.B)
			}}
		}
	case op == 6:
		// Hand an object to another worker, who will free it: a remote free.
		if o, ok := take(); ok {
			to := x.workers[x.ch.Intn(len(x.workers), "to")]
			to.mine = append(to.mine, o)
			to.remember(o.B)
		}
	case op < 9:
		// A stale free: an address w freed before (it may be free, reused in
		// another class, pooled or part of a large object by now), a double
		// free of an object w holds (a free of it may come in the same
		// round), or a pointer inside one.
		var b []byte
		switch k := x.ch.Intn(3, "stale"); {
		case k == 0 && len(w.freed) > 0:
			b = w.freed[x.ch.Intn(len(w.freed), "freed")]
		case k == 1 && len(w.mine) > 0:
			b = w.mine[x.ch.Intn(len(w.mine), "double")].B
		case len(w.mine) > 0:
			if o := w.mine[x.ch.Intn(len(w.mine), "inside")].B; cap(o) > 8 {
				b = o[:cap(o)][8*(1+x.ch.Intn(cap(o)/8-1, "offset")):]
			}
		}
		if b != nil {
			return eop{name(fmt.Sprintf("stale free %#x", addr(b))), func() {
				c, id := via()
				sh.StaleFree(c, id, b)
			}}
		}
	case op == 9 && x.ch.Intn(2, "realloc?") == 0:
		if o, ok := take(); ok {
			n := size()
			w.fill++
			fill := w.fill | 1
			return eop{name(fmt.Sprintf("realloc %#x to %d", addr(o.B), n)), func() {
				c, id := via()
				if r, _ := sh.Realloc(c, id, o, n, fill); r.B != nil {
					w.mine = append(w.mine, r)
				}
			}}
		}
	case op == 9:
		return eop{"flush", func() { w.c.Flush() }}
	case op == 10:
		// Close the cache (its superblocks become orphans) and open another.
		return x.closeReopen(sh, w)
	case op == 11:
		return eop{"Allocator.Flush", func() { sh.A.Flush() }}
	case op == 12:
		return eop{"Allocator.Trim", func() {
			if err := sh.A.Trim(); err != nil {
				sh.Record(violation(spec.RuleRefines, "Trim: %v", err))
			}
		}}
	}
	return eop{"nothing", func() {}}
}

// remember keeps b for later stale frees.
func (w *eworker) remember(b []byte) {
	if len(w.freed) == 8 || mutant.ExploreRemoteRemember && len(w.freed) == 1 { // a stale free reaches back to the last free only
		w.freed = w.freed[1:]
	}
	w.freed = append(w.freed, b)
}
