// Harness: drives an Allocator and the Model side by side, checking each call.

package invariants

import (
	"errors"
	"fmt"
	"reflect"
	"runtime/debug"
	"slices"
	"strings"
	"sync/atomic"
	"unsafe"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/refalloc/refalloc/impl"
	"github.com/refalloc/refalloc/internal/mutant"
	"github.com/refalloc/refalloc/oracle"
	"github.com/refalloc/refalloc/spec"
)

// Front is the cache ID of the Allocator's own goroutine-safe methods.
const Front = -1

// Harness applies operations to an Allocator and to the Model and returns the
// first violation. It is single-goroutine: the rapid machines and the program
// fuzzer drive it; the concurrent stress tests use the Model directly.
type Harness struct {
	A     *impl.Allocator
	M     *oracle.Model
	other *impl.Allocator // for "a pointer from another Allocator"

	caches map[int]*impl.Cache // open caches by ID
	// closedHandles keeps closed caches, to call them after Close (ErrClosed).
	closedHandles map[int]*impl.Cache
	ids           []int              // every cache ever opened, in order
	live          map[uintptr][]byte // live objects as the allocator returned them
	freed         []([]byte)         // objects freed before, for double frees
	fills         map[uintptr]byte   // INTEGRITY: each object's fill byte
	fill          byte
	debug         bool // Options.Debug: Leaks names allocation sites
	frontCalls    int  // calls on Front so far: their stack depth (call)
	route         int  // the front cache the current call on Front runs on, -1: the Allocator's methods
	served        int  // the ID of the front cache the last call on Front ran on, -1: unknown (the Allocator's methods)
	// CheckEachStep runs Check after every operation (the rapid machines do it
	// themselves in their "" action).
	CheckEachStep bool
	// LastErr is the error the allocator returned from the last call.
	LastErr error
	// LastAddr is the object the last successful Alloc or Realloc returned.
	LastAddr uintptr
	// misses is how many superblock-cache misses the frees so far counted, as
	// each was checked (checkMiss): no later step may lose one.
	misses uint64
	disarm func() // the watchdog
}

// NewHarness makes an Allocator with opt, its Model, and a second Allocator.
func NewHarness(opt impl.Options) (*Harness, error) {
	sh, err := NewShared(opt) // the same three things, shared-use aside
	if err != nil {
		return nil, err
	}
	return &Harness{
		A: sh.A, M: sh.M, other: sh.other, debug: opt.Debug, disarm: sh.disarm, route: -1, served: -1,
		caches: map[int]*impl.Cache{}, closedHandles: map[int]*impl.Cache{}, live: map[uintptr][]byte{}, fills: map[uintptr]byte{},
	}, nil
}

// Close closes the harness's allocators (the model checks the leak count).
func (h *Harness) Close() error {
	defer h.disarm()
	if !h.M.Closed() {
		if err := h.CloseAllocator(); err != nil {
			return err
		}
	}
	return h.other.Close()
}

func addr(b []byte) uintptr {
	if cap(b) == 0 {
		return 0
	}
	return uintptr(unsafe.Pointer(unsafe.SliceData(b)))
}

// api is what a Cache and the Allocator's goroutine-safe methods share.
type api interface {
	Alloc(int) ([]byte, error)
	AllocAligned(int, int) ([]byte, error)
	Realloc([]byte, int) ([]byte, error)
	Free([]byte) error
}

func (h *Harness) cache(id int) api {
	if id == Front {
		return frontAPI{h}
	}
	if c := h.caches[id]; c != nil {
		return c
	}
	return nil
}

func (h *Harness) step(v *oracle.Violation) error {
	progress()
	if v != nil {
		return v
	}
	if h.CheckEachStep {
		return h.Check()
	}
	return nil
}

// NewCache opens a cache and returns its ID.
func (h *Harness) NewCache() (int, error) {
	c, err := h.A.NewCache()
	if h.M.Closed() {
		if Kind(err) != oracle.Closed {
			return 0, violation(spec.RuleRefines, "NewCache after Close returned %v", err)
		}
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	cid := c.ID()
	h.caches[cid] = c
	h.ids = append(h.ids, cid)
	return cid, h.step(h.M.OpenCache(cid))
}

// Caches returns the IDs of the open caches.
func (h *Harness) Caches() []int { return h.M.OpenCaches() }

// AllIDs returns every cache ID ever opened (closed ones too).
func (h *Harness) AllIDs() []int { return h.ids }

// sawHook, if set (by a test), is told of each call a driver asks the
// Harness for, before it is made: what the driver's draws reached (as
// fuzz's observe is of a program's commands; freeTailHook is FreeTail's).
var sawHook func(sawCall)

// sawCall is one call a driver asked the Harness for.
type sawCall struct {
	Call     string  // "alloc", "realloc", "free bad", "touch"
	ID       int     // the cache; Front: the Allocator's methods
	Addr     uintptr // realloc: the object resized (0: nil); free bad: the slice freed
	N, Align int     // alloc, realloc: the size and alignment; free bad: the kind
	// Offset, Size: touch: the byte touched and the object's usable size.
	Offset, Size int
	Write        bool // touch: a write
	Closed       bool // the cache (or, for Front, the Allocator) is closed
}

func (h *Harness) saw(c sawCall) {
	if sawHook != nil {
		c.Closed = h.M.Closed() || c.ID != Front && h.caches[c.ID] == nil
		sawHook(c)
	}
}

// Alloc allocates n bytes aligned to align (1: Alloc) on cache id (Front: the
// Allocator's methods), checks ZEROED, and fills the object (INTEGRITY).
func (h *Harness) Alloc(id, n, align int) error {
	h.saw(sawCall{Call: "alloc", ID: id, N: n, Align: align})
	c := h.cache(id)
	if c == nil { // closed cache: call it anyway through the closed handle
		return h.allocClosed(id, n, align)
	}
	var b []byte
	var err error
	h.call(id, func() {
		if align == 1 {
			b, err = c.Alloc(n)
		} else {
			b, err = c.AllocAligned(n, align)
		}
	})
	h.LastErr = err
	if v := h.M.Alloc(id, n, align, addr(b), len(b), cap(b), Kind(err)); v != nil {
		return v
	}
	if err != nil {
		if Kind(err) == oracle.OutOfMemory {
			s := h.A.Snapshot()
			if vs := h.checkOOM(s, id, n, align); len(vs) > 0 {
				return vs[0]
			}
		}
		return h.step(nil)
	}
	full := b[:cap(b)]
	for i, x := range full {
		if x != 0 {
			return violation(spec.RuleZeroed, "Alloc(%d) = %#x: byte %d of %d is %#x", n, addr(b), i, cap(b), x)
		}
	}
	return h.hold(b)
}

// hold fills b, an object just handed out (by Alloc or a moving or in-place
// Realloc), with the next fill byte and records it as live (INTEGRITY: every
// later check compares its bytes with the fill), then checks the step.
func (h *Harness) hold(b []byte) error {
	h.fill++
	if h.fill == 0 || mutant.FillSame {
		h.fill = 1
	}
	full := b[:cap(b)]
	for i := range full {
		full[i] = h.fill
	}
	h.live[addr(b)] = b
	h.fills[addr(b)] = h.fill
	h.LastAddr = addr(b)
	return h.step(nil)
}

// frontIDs are the IDs of the Allocator's own caches, any of which may serve a
// call on Front.
func frontIDs(s *impl.Snapshot) []int {
	var ids []int
	for _, c := range s.Caches {
		if c.Front {
			ids = append(ids, c.ID)
		}
	}
	return ids
}

// oomIDs (OOM-REAL) are the caches one of which must show the state an
// out-of-memory leaves, after a call on cache id: id itself; for Front, the
// internal cache a routed call ran on (call), or, for a call through the
// Allocator's methods, any internal cache: which one served it is the front's
// business. "Any" is weak, since an idle internal cache always shows that
// state, so a routed call is judged by its own cache, and checkOOM judges an
// unrouted one by every internal cache.
func (h *Harness) oomIDs(s *impl.Snapshot, id int) []int {
	switch {
	case id != Front:
		return []int{id}
	case h.served >= 0 && !mutant.FrontOOMAnyCache: // OOM-REAL
		return []int{h.served}
	}
	return frontIDs(s)
}

// checkOOM (OOM-REAL) judges an out-of-memory answer to a call on cache id:
// by the caches oomIDs names and, for a call through the Allocator's methods,
// by every internal cache, one by one. Such a call that runs out flushes them
// all and looks again (Allocator.outOfMemory), so whichever served it, none
// may still hold objects, own an empty superblock or leave remote frees
// pending: the harness runs one call at a time, and nothing refills them
// meanwhile. Free objects of the class in a superblock an internal cache
// owns are only the serving cache's to use (the others keep their partial
// superblocks), so oomIDs' "any" judges those.
func (h *Harness) checkOOM(s *impl.Snapshot, id, n, align int) []*Violation {
	if id == Front && h.served < 0 && !mutant.FrontOOMAnyOne {
		sbs, _ := smalls(s)
		for _, fid := range frontIDs(s) {
			if why := cacheOOMState(s, sbs, fid, n, align, 0, false); len(why) > 0 {
				return why
			}
		}
	}
	return CheckOOM(s, h.oomIDs(s, id), n, align)
}

func (h *Harness) allocClosed(id, n, align int) error {
	_, err := h.closedCache(id).AllocAligned(n, align)
	h.LastErr = err
	return h.step(h.M.Alloc(id, n, align, 0, 0, 0, Kind(err)))
}

// closed caches are kept to call them after Close.
func (h *Harness) closedCache(id int) *impl.Cache { return h.closedHandles[id] }

// Live returns the addresses of the live objects (in no particular order).
func (h *Harness) Live() []uintptr {
	out := make([]uintptr, 0, len(h.live))
	for _, o := range h.M.Live() {
		out = append(out, o.Addr)
	}
	return out
}

// Owner returns the cache that allocated the live object at a.
func (h *Harness) Owner(a uintptr) int {
	o, _ := h.M.LiveAt(a)
	return o.Cache
}

// Free frees the live object at a on cache id, after checking its fill.
func (h *Harness) Free(id int, a uintptr) error {
	b, ok := h.live[a]
	if !ok {
		return fmt.Errorf("harness: %#x is not live", a)
	}
	if v := h.intact(a); v != nil {
		return v
	}
	got, err := h.free(id, b)
	if err != nil {
		return err
	}
	if got == oracle.OK {
		delete(h.live, a)
		delete(h.fills, a)
		h.freed = append(h.freed, b)
	}
	return h.step(nil)
}

// free frees b on cache id and checks the outcome with the model and, for a
// cache that is open, with ExpectFree's exact prediction from a snapshot.
func (h *Harness) free(id int, b []byte) (oracle.Kind, error) {
	expect := []oracle.Kind{oracle.Closed}
	if addr(b) == 0 {
		expect[0] = oracle.OK // nil or empty: a no-op, even closed (FREE-INVALID)
	}
	var before *impl.Snapshot
	var ids []int
	if c := h.cache(id); c != nil && !h.M.Closed() {
		before = h.A.Snapshot()
		ids = []int{id}
		if id == Front {
			ids = frontIDs(before)
		}
		expect = expect[:0]
		for _, cid := range ids {
			expect = append(expect, ExpectFree(before, cid, addr(b)))
		}
	}
	var err error
	if c := h.cache(id); c != nil {
		h.call(id, func() { err = c.Free(b) })
	} else {
		err = h.closedCache(id).Free(b)
	}
	h.LastErr = err
	got := Kind(err)
	if v := h.M.Free(id, addr(b), got); v != nil {
		return got, v
	}
	if v := freeVerdict(id, addr(b), expect, got); v != nil {
		return got, v
	}
	if before != nil {
		after := h.A.Snapshot()
		if v := refusalVerdict(id, addr(b), got, before, after); v != nil {
			return got, v
		}
		if v := checkMiss(before, after, ids, addr(b)); v != nil {
			return got, v
		}
		h.misses += totalMisses(after) - totalMisses(before)
	}
	return got, nil
}

// freeVerdict (FREE-DOUBLE, FREE-INVALID) judges a free of a on cache id that
// returned got, where expect are the outcomes the snapshot before it allows
// (ExpectFree for each cache that may serve it): nil if got is one of them.
func freeVerdict(id int, a uintptr, expect []oracle.Kind, got oracle.Kind) *Violation {
	if slices.Contains(expect, got) || mutant.FreeVerdictDoubleOK && got == oracle.DoubleFree { // FREE-DOUBLE: a refusal as double free always passes
		return nil
	}
	rule := spec.RuleFreeDouble
	if slices.Contains(expect, oracle.InvalidPointer) || got == oracle.InvalidPointer {
		rule = spec.RuleFreeInvalid
	}
	return violation(rule, "Free(%#x) on cache %d returned %v; the snapshot says %v", a, id, got, expect)
}

// refusalVerdict (FREE-INVALID) judges a free of a on cache id that returned
// got, by the snapshots before and after it: a free refused as invalid that
// changed the state (RefusalDiff) is reported; nil otherwise.
func refusalVerdict(id int, a uintptr, got oracle.Kind, before, after *impl.Snapshot) *Violation {
	if got != oracle.InvalidPointer || mutant.HRefusalDiff { // FREE-INVALID: a refusal's changes unchecked
		return nil
	}
	if d := RefusalDiff(before, after); d != "" {
		return violation(spec.RuleFreeInvalid, "Free(%#x) on cache %d returned %v and changed the state:\n%s", a, id, got, d)
	}
	return nil
}

// RefusalDiff is what changed from before to after, snapshots around a free
// refused as invalid, that FREE-INVALID says it must not change: anything but
// the statistics (the bad-free counter counts it, a miss may be counted) and
// the superblock-cache entries (a cache, filled on the way), nor what the
// decay timer did meanwhile, if it fired. "" if nothing.
func RefusalDiff(before, after *impl.Snapshot) string {
	if (before.TimerFired != after.TimerFired || mutant.UndoDecayAlways) && !mutant.RefusalBlamesTimer {
		after = undoDecay(before, after)
	}
	// The same comparison by reflect.DeepEqual first: cmp.Diff of two whole
	// snapshots is slow, and a refusal is usually right.
	strip := func(s impl.Snapshot) impl.Snapshot {
		s.Stats, s.Now = impl.Stats{}, 0
		s.Caches = slices.Clone(s.Caches)
		for i := range s.Caches {
			s.Caches[i].CacheCounters, s.Caches[i].Entries = impl.CacheCounters{}, nil
		}
		return s
	}
	if reflect.DeepEqual(strip(*before), strip(*after)) {
		return ""
	}
	return cmp.Diff(before, after, cmpopts.IgnoreFields(impl.Snapshot{}, "Stats", "Now"),
		cmpopts.IgnoreFields(impl.CacheState{}, "CacheCounters", "Entries"))
}

// undoDecay is after with what the decay timer does undone (MEM-ACCOUNT): a
// superblock pooled in both snapshots, dirty before, returned to the OS. The
// timer runs on its own goroutine, so a call between two snapshots may see it
// fire; nothing else a refused free could do looks like this, since a
// refusal takes nothing from the pool and puts nothing in.
func undoDecay(before, after *impl.Snapshot) *impl.Snapshot {
	s := *after
	s.TimerFired = before.TimerFired
	s.Superblocks = slices.Clone(after.Superblocks)
	old := map[int]impl.SuperblockState{}
	for _, b := range before.Superblocks {
		old[b.Index] = b
	}
	for i := range s.Superblocks {
		st := &s.Superblocks[i]
		if b, ok := old[st.Index]; ok && b.State == impl.SBPool && st.State == impl.SBPool && b.Dirty && !st.Dirty {
			st.Dirty, st.PooledAt = true, b.PooledAt
		}
	}
	return &s
}

// checkMiss checks that a free of addr by one of the caches ids counted the
// superblock-cache miss ExpectMiss predicts for it (the Allocator's methods:
// for one of its caches), and no other cache counted one.
func checkMiss(before, after *impl.Snapshot, ids []int, addr uintptr) *Violation {
	misses := func(s *impl.Snapshot) map[int]uint64 {
		m := map[int]uint64{}
		for _, c := range s.Caches {
			m[c.ID] = c.SuperblockCacheMisses + c.UnpublishedMisses
		}
		return m
	}
	b, a := misses(before), misses(after)
	var counted []int
	for id, n := range a {
		if n != b[id] {
			counted = append(counted, id)
		}
	}
	for _, id := range ids {
		want := uint64(0)
		if ExpectMiss(before, id, addr) {
			want = 1
		}
		if a[id]-b[id] == want && (len(counted) == 0 || len(counted) == 1 && counted[0] == id) {
			return nil
		}
	}
	return violation(spec.RuleCacheCoherent, "a free of %#x by one of caches %v: caches %v counted superblock-cache misses, the snapshot before says %v",
		addr, ids, counted, expectMisses(before, ids, addr))
}

// Untracked takes note of calls the harness did not make (a test that calls impl
// directly, on another goroutine, to race it): the superblock-cache misses they
// counted are taken as they are.
func (h *Harness) Untracked() { h.misses = totalMisses(h.A.Snapshot()) }

// missesNow is totalMisses now, 0 once the Allocator is closed.
func (h *Harness) missesNow() uint64 {
	if h.M.Closed() {
		return 0
	}
	return totalMisses(h.A.Snapshot())
}

// totalMisses is every superblock-cache miss counted: published by open
// caches, waiting in them, or left by closed ones.
func totalMisses(s *impl.Snapshot) uint64 {
	n := s.Retired.SuperblockCacheMisses
	for _, c := range s.Caches {
		n += c.SuperblockCacheMisses + c.UnpublishedMisses
	}
	return n
}

func expectMisses(s *impl.Snapshot, ids []int, addr uintptr) []bool {
	var out []bool
	for _, id := range ids {
		out = append(out, ExpectMiss(s, id, addr))
	}
	return out
}

// FreeSlice frees b, whatever it is, on cache id and checks the outcome with the
// model; a live object must be freed with Free, which also checks its fill.
func (h *Harness) FreeSlice(id int, b []byte) error {
	if _, ok := h.live[addr(b)]; ok {
		return h.Free(id, addr(b))
	}
	if _, err := h.free(id, b); err != nil {
		return err
	}
	return h.step(nil)
}

// Object returns the live object at a as the allocator returned it.
func (h *Harness) Object(a uintptr) []byte { return h.live[a] }

// Cache returns the open cache id.
func (h *Harness) Cache(id int) *impl.Cache { return h.caches[id] }

// Bad free kinds.
const (
	BadNil = iota
	BadInterior
	BadGoHeap
	BadOtherAllocator
	BadDouble
	BadWild
	NumBad
)

// FreeBad makes a bad free of the given kind on cache id; pick selects among the
// candidates (live objects, freed objects, offsets).
func (h *Harness) FreeBad(id, kind, pick int) error {
	b, done, err := h.badSlice(kind, pick)
	if err != nil {
		return ignoreNone(err)
	}
	defer done()
	h.saw(sawCall{Call: "free bad", ID: id, Addr: addr(b), N: kind})
	if _, err := h.free(id, b); err != nil {
		return err
	}
	return h.step(nil)
}

// ReallocBad is Realloc(b, size(cap(b))) on cache id of a slice b that is not
// a live object, of the given kind (BadNil: Realloc(nil, n), which is Alloc(n)).
func (h *Harness) ReallocBad(id, kind, pick int, size func(capacity int) int) error {
	b, done, err := h.badSlice(kind, pick)
	if err != nil {
		return ignoreNone(err)
	}
	defer done()
	return h.realloc(id, b, size(cap(b)))
}

// errNone: badSlice has no candidate of that kind.
var errNone = errors.New("no candidate")

// badSlice makes a slice of the given kind that is not a live object; pick
// selects among the candidates (errNone if there is none). done releases what
// it took.
func (h *Harness) badSlice(kind, pick int) (b []byte, done func(), err error) {
	done = func() {}
	switch kind {
	case BadNil:
		b = nil
	case BadInterior:
		if len(h.live) == 0 {
			return nil, done, errNone
		}
		o := h.live[h.nth(pick)]
		if cap(o) < 2 {
			return nil, done, errNone
		}
		b = o[:cap(o)][1+pick%(cap(o)-1):]
	case BadGoHeap:
		b = make([]byte, 1+pick%100)
	case BadOtherAllocator:
		o, err := h.other.Alloc(1 + pick%100)
		if err != nil {
			return nil, done, err
		}
		b, done = o, func() { h.other.Free(o) }
	case BadDouble:
		if len(h.freed) == 0 {
			return nil, done, errNone
		}
		b = h.freed[pick%len(h.freed)]
		if mutant.DoubleLastOnly {
			b = h.freed[len(h.freed)-1]
		}
		if _, ok := h.live[addr(b)]; ok {
			return nil, done, errNone // the address is live again: that would be a real free
		}
	case BadWild:
		if len(h.freed) == 0 && len(h.live) == 0 {
			return nil, done, errNone
		}
		var o []byte
		if len(h.freed) > 0 {
			o = h.freed[pick%len(h.freed)]
		} else {
			o = h.live[h.nth(pick)]
		}
		// An offset that keeps the pointer inside the reservation, on any
		// 8-byte boundary: the odd slots of the 8-byte class too, the only
		// class whose size is not a multiple of 16.
		step := 8
		if mutant.BadWildEven { // FREE-DOUBLE: no wild free reaches an odd 8-byte slot
			step = 16
		}
		p := unsafe.Add(unsafe.Pointer(unsafe.SliceData(o)), -int(addr(o)-h.M.Base())%spec.SuperblockSize+step*(pick%(spec.SuperblockSize/step)))
		if uintptr(p) >= h.M.Base()+h.M.Size() {
			return nil, done, errNone
		}
		b = unsafe.Slice((*byte)(p), 1)
		if _, ok := h.live[addr(b)]; ok {
			return nil, done, errNone
		}
	}
	return b, done, nil
}

func ignoreNone(err error) error {
	if err == errNone {
		return nil
	}
	return err
}

func (h *Harness) nth(pick int) uintptr {
	objs := h.M.Live()
	return objs[pick%len(objs)].Addr
}

// TouchQuarantined reads (or writes) a byte of a freed object in quarantine,
// picked by pick, where guard mode protects memory: the access must fault,
// and Explain (through CatchFaults) must name the object, its class and size,
// and the stacks that allocated and freed it (GUARD-FAULT). Explain, called on
// what recover returns after the same access faults again, must say the same
// but for the access's stack, and return CatchFaults' report as it is;
// GuardProtects must agree with the snapshot. Nothing else may change.
// Without such an object it does nothing.
func (h *Harness) TouchQuarantined(pick int, write bool) error {
	if h.M.Closed() {
		return nil
	}
	s := h.A.Snapshot()
	q := s.Guard.Quarantine
	if h.A.GuardProtects() != s.Guard.Protects {
		return violation(spec.RuleGuardFault, "GuardProtects is %v, the snapshot says %v", h.A.GuardProtects(), s.Guard.Protects)
	}
	if !s.Guard.Protects || len(q) == 0 {
		return nil
	}
	e := q[pick%len(q)]
	if mutant.TouchOldestOnly { // GUARD-FAULT: only the oldest quarantined object touched
		e = q[0]
	}
	// A pointer to it, from any slice of the reservation the harness has.
	var ref []byte
	for _, f := range h.freed {
		ref = f
	}
	for _, o := range h.live {
		ref = o
	}
	if ref == nil {
		return nil
	}
	p := unsafe.Add(unsafe.Pointer(unsafe.SliceData(ref)), int(e.Addr)-int(addr(ref)))
	span := unsafe.Slice((*byte)(p), e.Superblocks*s.SuperblockSize)
	i := (pick / len(q)) % len(span)
	if pick%3 == 0 || mutant.TouchInsideOnly {
		i = (pick / len(q)) % e.Usable // mostly inside the object itself
	}
	h.saw(sawCall{Call: "touch", Offset: i, Size: e.Usable, Write: write})
	report := touch(h.A, span, i, write)
	switch {
	case report == nil:
		return violation(spec.RuleGuardFault, "byte %d of the freed %d-byte object %#x (in quarantine): the access did not fault", i, e.Usable, e.Addr)
	case !reportNames(report, e, i):
		return violation(spec.RuleGuardFault, "a fault at byte %d of the freed %d-byte object %#x (class %d) was reported as %+v", i, e.Usable, e.Addr, e.Class, report)
	}
	explained, ok := touchExplain(h.A, span, i, write)
	want := *report
	want.AccessSite = "" // Explain has no access to name
	if !ok || *explained != want {
		return violation(spec.RuleGuardFault, "the fault at byte %d of the freed object %#x again: Explain(recover()) gave %+v, %v; CatchFaults %+v", i, e.Addr, explained, ok, report)
	}
	if again, ok := h.A.Explain(report); !ok || again != report {
		return violation(spec.RuleGuardFault, "Explain of CatchFaults' report gave %p, %v, want the report itself", again, ok)
	}
	return h.step(nil)
}

// reportNames reports whether report, CatchFaults' report of an access to
// byte i of the quarantined object e, names it (GUARD-FAULT): the address,
// the object, the offset, class and size, and the three stacks.
func reportNames(report *impl.UseAfterFreeError, e impl.Quarantined, i int) bool {
	return report.Addr == e.Addr+uintptr(i) && report.Object == e.Addr && (report.Offset == i || mutant.ReportOffsetSkip) &&
		report.Class == e.Class && report.Size == e.Usable &&
		report.AllocSite != "" && report.FreeSite != "" && report.AccessSite != "" && !report.Released
}

// touchExplain reads or writes b[i] as touch does, with the fault caught the
// way Explain's doc shows: SetPanicOnFault, recover, Explain.
func touchExplain(a *impl.Allocator, b []byte, i int, write bool) (report *impl.UseAfterFreeError, ok bool) {
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	defer func() { report, ok = a.Explain(recover()) }()
	if write {
		b[i] = 0x5a
	} else {
		touched.Store(uint32(b[i]))
	}
	return nil, false
}

// touch reads or writes b[i] with faults turned into panics, and returns
// CatchFaults' report of the fault, if there was one.
func touch(a *impl.Allocator, b []byte, i int, write bool) (report *impl.UseAfterFreeError) {
	defer a.CatchFaults(func(e *impl.UseAfterFreeError) { report = e })()
	if write {
		b[i] = 0x5a
	} else {
		touched.Store(uint32(b[i]))
	}
	return nil
}

// touched keeps touch's read of a freed byte from being dropped; atomic, as
// parallel tests' harnesses touch at once.
var touched atomic.Uint32

// Flush flushes cache id (Front: the Allocator's, every shard) and checks
// that the flushed caches hold nothing and left nothing unpublished
// (STATS-EXACT, flushed).
func (h *Harness) Flush(id int) error {
	if id == Front {
		h.A.Flush()
	} else if c := h.caches[id]; c != nil {
		c.Flush()
	} else {
		h.closedCache(id).Flush() // a no-op
		return h.step(nil)
	}
	if !h.M.Closed() {
		s := h.A.Snapshot()
		if vs := flushed(s, flushedIDs(s, id)); len(vs) > 0 {
			return join(vs)
		}
	}
	return h.step(nil)
}

// FlushAll flushes every open cache and checks STATS-EXACT.
func (h *Harness) FlushAll() error {
	if h.M.Closed() {
		return nil
	}
	for _, id := range h.Caches() {
		h.caches[id].Flush()
	}
	h.A.Flush()
	s := h.A.Snapshot()
	return join(append(CheckFlushed(s, h.M), flushed(s, nil)...))
}

// Trim returns empty memory to the OS (impl.Allocator.Trim) and checks that it
// did: the Allocator's caches are flushed and no pooled superblock is still
// committed, so Committed is InUse (MEM-ACCOUNT).
func (h *Harness) Trim() error {
	err := h.A.Trim()
	h.LastErr = err
	if !mutant.TrimUnchecked && (h.M.Closed() != (Kind(err) == oracle.Closed) || err != nil && Kind(err) != oracle.Closed) {
		return violation(spec.RuleRefines, "Trim: %v", err)
	}
	if err == nil {
		if vs := checkTrimmed(h.A.Snapshot()); len(vs) > 0 {
			return join(vs)
		}
	}
	return h.step(nil)
}

// checkTrimmed checks a snapshot taken just after a successful Trim
// (MEM-ACCOUNT): the caches flushed, no pooled superblock committed, and
// Committed is InUse plus what guard mode keeps committed in quarantine.
func checkTrimmed(s *impl.Snapshot) []*Violation {
	vs := flushed(s, frontIDs(s))
	if mutant.TrimNoFrontFlush {
		vs = nil
	}
	var quarantined uint64 // GUARD-FAULT: poisoned, not decommitted, where memory cannot be protected
	for _, st := range s.Superblocks {
		if st.Dirty && st.State == impl.SBPool && !(mutant.TrimPooledAtZero && st.PooledAt == 0) { // MEM-ACCOUNT: a superblock pooled at 0 passes
			vs = append(vs, violation(spec.RuleMemAccount, "after Trim pooled superblock %d is still committed", st.Index))
		}
		if (st.Dirty || mutant.TrimQuarantineAll) && st.State == impl.SBQuarantine { // MEM-ACCOUNT: every quarantined superblock taken as committed
			quarantined += uint64(s.SuperblockSize)
		}
	}
	if s.Stats.Committed != s.Stats.InUse+quarantined {
		vs = append(vs, violation(spec.RuleMemAccount, "after Trim Committed is %d, InUse %d, %d bytes quarantined committed", s.Stats.Committed, s.Stats.InUse, quarantined))
	}
	return vs
}

// CloseCache closes cache id.
func (h *Harness) CloseCache(id int) error {
	c := h.caches[id]
	if c == nil {
		c = h.closedCache(id)
	}
	err := c.Close()
	h.LastErr = err
	if v := h.M.CloseCache(id, Kind(err)); v != nil {
		return v
	}
	if h.caches[id] != nil {
		h.closedHandles[id] = c
		delete(h.caches, id)
	}
	return h.step(nil)
}

// CloseAllocator closes the Allocator and checks the leak count.
func (h *Harness) CloseAllocator() error {
	leaked := len(h.Live())
	err := h.A.Close()
	h.LastErr = err
	got := oracle.OK
	if errors.Is(err, impl.ErrLeaked) {
		if !containsCount(err, leaked) {
			return violation(spec.RuleEmpty, "Close: %v, but %d objects are live", err, leaked)
		}
	} else {
		got = Kind(err)
		if (err == nil) != mutant.CloseNilLeaks {
			leaked = 0
		}
	}
	for id, c := range h.caches {
		h.closedHandles[id] = c
	}
	h.caches = map[int]*impl.Cache{}
	if v := h.M.Close(got, leaked); v != nil {
		return v
	}
	return nil
}

func containsCount(err error, n int) bool {
	return strings.Contains(err.Error(), fmt.Sprintf(" %d objects", n))
}

// FreeAll frees every live object on the cache that allocated it (or Front),
// flushes every cache, and checks EMPTY.
func (h *Harness) FreeAll() error {
	if h.M.Closed() {
		return nil
	}
	for _, o := range h.M.Live() {
		id := o.Cache
		if id != Front && h.caches[id] == nil {
			id = Front
		}
		if err := h.Free(id, o.Addr); err != nil {
			return err
		}
	}
	if err := h.FlushAll(); err != nil {
		return err
	}
	return join(CheckEmpty(h.A.Snapshot(), h.M))
}

// Check runs every invariant on a fresh snapshot.
func (h *Harness) Check() error {
	if h.M.Closed() {
		return nil
	}
	s := h.A.Snapshot()
	vs := append(Check(s, h.M), NoFalsePoison(s)...)
	if got := totalMisses(s); got != h.misses {
		vs = append(vs, violation(spec.RuleStatsExact, "%d superblock-cache misses counted, the frees made %d", got, h.misses))
	}
	return join(vs)
}

func join(vs []*Violation) error {
	if len(vs) == 0 {
		return nil
	}
	errs := make([]error, len(vs))
	for i, v := range vs {
		errs[i] = v
	}
	return errors.Join(errs...)
}
