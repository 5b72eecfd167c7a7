package invariants_test

import (
	"slices"
	"strings"
	"testing"
	"unsafe"

	"github.com/refalloc/refalloc/impl"
	"github.com/refalloc/refalloc/invariants"
	"github.com/refalloc/refalloc/oracle"
	"github.com/refalloc/refalloc/spec"
)

// Tests from adv3, an outside round of semantic bugs written into the checkers
// and the model: each feeds one check what only that check can see, and
// requires its own report.

// TestConserveCatchesPendingBeyondObjects (CONSERVE): a pending remote free
// past a superblock's last object (a tail address a remote free took for a
// slot) is a bit beyond its objects, like a free or held one.
// Slip: the check ORs the free and held bits and forgets the pending ones.
func TestConserveCatchesPendingBeyondObjects(t *testing.T) {
	h, id := setup(t)
	k := recycled(t, h, id) // class 4096: 16 objects, one group of 16 bits
	s := clean(t, h)
	for i := range s.Superblocks {
		if st := &s.Superblocks[i]; st.State == impl.SBSmall && st.Class == k {
			st.Pending[0] |= 1 << 20
			st.Notified = true // announced: only the bits beyond can be wrong
		}
	}
	fires(t, spec.RuleConserve, "bits beyond its", invariants.Check(s, h.M))
}

// TestOOMCatchesOrphanWithOneFree (OOM-REAL): before an out-of-memory, a
// refill that finds no partial superblock and no room in the pool adopts an
// orphan with any free object of the class, fewer than a sixteenth too
// (impl.Cache.sparse). An orphan of class 112 (585 objects) with one free
// object must make CheckOOM refuse the out-of-memory.
// Slip: the orphan check uses LIFECYCLE's partial threshold (a sixteenth)
// instead of "any free object".
func TestOOMCatchesOrphanWithOneFree(t *testing.T) {
	h, id := setup(t)
	must(t, h.Alloc(id, 100, 1))
	k := oracle.ClassOf(100, 1)
	if spec.ClassObjects(k)/16 < 2 {
		t.Fatalf("class %d has %d objects: one free object is a sixteenth", k, spec.ClassObjects(k))
	}
	s := clean(t, h)
	s.FreeRuns = nil // no room in the pool
	orphaned := 0
	for i := range s.Caches {
		s.Caches[i].Held = nil
	}
	for i := range s.Superblocks {
		if st := &s.Superblocks[i]; st.State == impl.SBSmall && st.Class == k {
			st.Owner, st.Orphan, st.Current, st.List = -1, true, false, "orphan"
			clear(st.Free)
			st.Free[len(st.Free)-1] = 1 // one free object, in the last group
			st.NFree, st.LocalFreed = 1, 0
			orphaned++
		}
	}
	if orphaned != 1 {
		t.Fatalf("%d superblocks of class %d, want 1", orphaned, k)
	}
	fires(t, spec.RuleOOMReal, "free objects in orphan", invariants.CheckOOM(s, []int{id}, 100, 1))
}

// TestFlushedCatchesPendingRemoteFree (STATS-EXACT): after a cache's Flush,
// no superblock it owns has a remote free pending (Flush collects them).
// Slip: the check after Flush looks at the unpublished local frees only.
func TestFlushedCatchesPendingRemoteFree(t *testing.T) {
	h, id := setup(t)
	must(t, h.Alloc(id, 100, 1))
	must(t, h.Flush(id))
	s := h.A.Snapshot()
	if vs := invariants.Flushed(s, []int{id}); len(vs) != 0 {
		t.Fatalf("a flushed cache fails: %v", vs)
	}
	for i := range s.Superblocks {
		if st := &s.Superblocks[i]; st.State == impl.SBSmall && st.Owner == id {
			st.Pending[0] |= 1 // the live object, freed remotely and not collected
		}
	}
	fires(t, spec.RuleStatsExact, "pending", invariants.Flushed(s, []int{id}))
}

// strayInNextSlot writes a byte into the last byte of the slot after b's, a
// fresh slot of b's class that the cache hands out next: fresh memory is not
// zeroed again, so that object comes back dirty past any len < its capacity.
func strayInNextSlot(b []byte) {
	size := cap(b)
	unsafe.Slice(unsafe.SliceData(b), 2*size)[2*size-1] = 7
}

// TestHarnessReallocChecksWholeCapacity (ZEROED): Realloc's bytes past those
// it kept read zero up to the result's capacity, not its length. A Realloc
// that moves an 8-byte object to 100 bytes lands in the next slot of class
// 112, whose last byte was written while it was free.
// Slip: the zero check stops at len(r).
func TestHarnessReallocChecksWholeCapacity(t *testing.T) {
	h, id := setup(t)
	must(t, h.Alloc(id, 100, 1))
	strayInNextSlot(h.Object(h.LastAddr))
	must(t, h.Alloc(id, 8, 1))
	if err := h.Realloc(id, h.LastAddr, 100); err == nil || !strings.Contains(err.Error(), spec.RuleZeroed) {
		t.Fatalf("Realloc into a slot with a dirty byte past len: %v", err)
	}
}

// TestSharedChecksWholeCapacity (ZEROED, INTEGRITY): Shared, like the
// harness, checks an object over its capacity: an Alloc handed a fresh slot
// with a dirty byte past len, a live object whose tail was overwritten when it
// is freed, and one nobody frees at CheckFills. Its Realloc (REFINES) keeps
// every byte up to min(len, n), the last one too: one in place (100 to 104
// bytes, class 112) whose byte 99 changes while the call is in flight (a copy
// one byte short) is reported; and it reads the bytes after those zero up to
// the new capacity: a Realloc that moves an 8-byte object to 100 bytes into
// a next slot of class 112 written while it was free is reported.
// Slips: any of the three checks ranges over len(b) only; adv20's mutants
// sharedkeptshort (the kept bytes but the last) and sharedkeptlen (the bytes
// past them up to len).
func TestSharedChecksWholeCapacity(t *testing.T) {
	sh, err := invariants.NewShared(impl.Options{Reserve: 16 * spec.SuperblockSize})
	must(t, err)
	defer sh.Close()
	c, id, err := sh.OpenCache()
	must(t, err)
	o, ok := sh.Alloc(c, id, 100, 1, 0x11)
	if !ok {
		t.Fatal("Alloc failed")
	}
	strayInNextSlot(o.B)
	p, _ := sh.Alloc(c, id, 100, 1, 0x22)
	if !slices.ContainsFunc(sh.Violations(), func(v *invariants.Violation) bool { return v.Rule == spec.RuleZeroed }) {
		t.Fatalf("a slot with a dirty byte past len handed out: %v", sh.Violations())
	}
	o.B[:cap(o.B)][cap(o.B)-1] ^= 0xff
	sh.Free(c, id, o)
	if !slices.ContainsFunc(sh.Violations(), func(v *invariants.Violation) bool { return v.Rule == spec.RuleIntegrity }) {
		t.Fatalf("a live object's tail overwritten, then freed: %v", sh.Violations())
	}
	q, ok := sh.Alloc(c, id, 100, 1, 0x33)
	if !ok {
		t.Fatal("Alloc failed")
	}
	q.B[:cap(q.B)][cap(q.B)-1] ^= 0xff
	sh.CheckFills()
	fires(t, spec.RuleIntegrity, "no longer holds its fill", sh.Violations())
	if p.B != nil {
		sh.Free(c, id, p)
	}

	// adv20: Realloc, on a cache of its own (fresh slots in order).
	d, did, err := sh.OpenCache()
	must(t, err)
	k, ok := sh.Alloc(d, did, 100, 1, 0x44)
	if !ok {
		t.Fatal("Alloc failed")
	}
	x := addrOf(k.B)
	sh.SetHook(func(at invariants.HookPoint, a uintptr) {
		if at == invariants.HookCall && a == x {
			k.B[99] ^= 0xff
		}
	})
	r, ok := sh.Realloc(d, did, k, 104, 0x55)
	sh.SetHook(nil)
	if !ok || addrOf(r.B) != x {
		t.Fatalf("set-up: Realloc(100 -> 104) did not stay in place: %v", sh.Violations())
	}
	fires(t, spec.RuleRefines, "did not keep the first 100 bytes", sh.Violations())
	k, ok = sh.Alloc(d, did, 100, 1, 0x66)
	e, ok2 := sh.Alloc(d, did, 8, 1, 0x77)
	if !ok || !ok2 {
		t.Fatal("Alloc failed")
	}
	strayInNextSlot(k.B)
	r, ok = sh.Realloc(d, did, e, 100, 0x88)
	if !ok || addrOf(r.B) != addrOf(k.B)+uintptr(cap(k.B)) {
		t.Fatalf("set-up: the Realloc did not move into the dirty slot after %#x: %v", addrOf(k.B), sh.Violations())
	}
	fires(t, spec.RuleZeroed, "bytes past the 8 kept are not zero", sh.Violations())
}

// TestEdgeSizesCoverEveryChange (ZEROED, ALIGN): the machine's and
// TestBoundaries' edge sizes hold both sides of every size where the usable
// size changes (the oracle's rule: the next class, large, one page more), up to
// three superblocks, and the reservation's edges.
// Slip: EdgeSizes lists each class's size but not the byte after it.
func TestEdgeSizesCoverEveryChange(t *testing.T) {
	const reservation = 16 * spec.SuperblockSize
	edges := map[int]bool{}
	for _, n := range invariants.EdgeSizes(reservation) {
		edges[n] = true
	}
	for n := 0; n < 3*spec.SuperblockSize; n++ {
		if oracle.UsableSize(n, 1) != oracle.UsableSize(n+1, 1) && !(edges[n] && edges[n+1]) {
			t.Errorf("the usable size changes between %d and %d bytes: EdgeSizes has %v and %v", n, n+1, edges[n], edges[n+1])
		}
	}
	for _, n := range []int{0, reservation - 1, reservation, reservation + 1} {
		if !edges[n] {
			t.Errorf("EdgeSizes lacks %d", n)
		}
	}
}

// TestSharedSettleChecksSurvivor (INTEGRITY): an object that outlives the
// stale frees on its address (here one through a closed cache, refused as
// ErrClosed) must still hold its fill over its whole capacity at Settle.
// Slip: Settle's fit test reads the survivor over its len only.
func TestSharedSettleChecksSurvivor(t *testing.T) {
	sh, err := invariants.NewShared(impl.Options{Reserve: 16 * spec.SuperblockSize})
	must(t, err)
	defer sh.Close()
	c, id, err := sh.OpenCache()
	must(t, err)
	d, closed, err := sh.OpenCache()
	must(t, err)
	sh.CloseCache(d, closed)
	o, ok := sh.Alloc(c, id, 100, 1, 0x11)
	if !ok {
		t.Fatal("Alloc failed")
	}
	sh.StaleFree(d, closed, o.B) // ErrClosed: o lives on
	o.B[:cap(o.B)][cap(o.B)-1] ^= 0xff
	sh.Settle()
	fires(t, spec.RuleIntegrity, "live after stale frees on it", sh.Violations())
}

// TestSharedSettleChecksSurvivorsSize (REFINES): the snapshot picks which
// outcome of the calls on an address happened; the object live before them
// survives only if the object live there now has its usable size. Behind
// Shared's back, the 2-superblock object is freed and a 1-superblock one takes
// its address; a stale free refused as ErrClosed leaves the old one live to
// the calls, which no order of them squares with the snapshot.
// Slip: Settle takes the object live before as the outcome whatever size the
// snapshot shows there.
func TestSharedSettleChecksSurvivorsSize(t *testing.T) {
	sh, err := invariants.NewShared(impl.Options{Reserve: 16 * spec.SuperblockSize})
	must(t, err)
	defer sh.Close()
	d, closed, err := sh.OpenCache()
	must(t, err)
	sh.CloseCache(d, closed)
	o, ok := sh.Alloc(nil, invariants.Front, 100_000, 1, 0x11) // 25 pages: 2 superblocks
	if !ok {
		t.Fatal("Alloc failed")
	}
	x := addrOf(o.B)
	must(t, sh.A.Free(o.B)) // behind Shared's back
	p, err := sh.A.Alloc(40_000)
	must(t, err)
	if addrOf(p) != x {
		t.Fatalf("the 1-superblock object is at %#x, want %#x", addrOf(p), x)
	}
	sh.StaleFree(d, closed, o.B) // ErrClosed
	sh.Settle()
	fires(t, spec.RuleRefines, "which no order of its calls leaves", sh.Violations())
	must(t, sh.A.Free(p))
}

// TestHarnessStatsCountsLargeSpans (LARGE-EXACT, MEM-ACCOUNT): Harness.Stats
// compares Stats.LargeSuperblocks with the superblocks the model's large
// objects span. Two 1-superblock objects whose sizes the model has as one
// page and 31 pages keep the live bytes (so CheckStats is content) and span
// three superblocks, not two.
// Slip: Harness.Stats compares the number of large objects only.
func TestHarnessStatsCountsLargeSpans(t *testing.T) {
	h, id := setup(t)
	must(t, h.Alloc(id, spec.SuperblockSize, 1))
	a := h.LastAddr
	must(t, h.Alloc(id, spec.SuperblockSize, 1))
	b := h.LastAddr
	must(t, h.Stats())
	oa, _ := h.M.Forget(a)
	ob, _ := h.M.Forget(b)
	oa.Usable, ob.Usable = spec.PageSize, 2*spec.SuperblockSize-spec.PageSize
	h.M.Restore(oa)
	h.M.Restore(ob)
	if err := h.Stats(); err == nil || !strings.Contains(err.Error(), "large objects in") {
		t.Fatalf("Stats with the model spanning 3 superblocks and the allocator 2: %v", err)
	}
}

// TestHarnessLeaksRefusesSiteOutsideDebug (REFINES): Leaks names an
// allocation site in debug mode (and for guarded objects) only. A harness
// that expects no debug mode of an allocator that records sites must refuse
// them.
// Slip: the check requires a site where one is due and never its absence.
func TestHarnessLeaksRefusesSiteOutsideDebug(t *testing.T) {
	h, err := invariants.NewHarness(impl.Options{Reserve: 32 * spec.SuperblockSize, Debug: true})
	must(t, err)
	t.Cleanup(func() { h.Close() })
	id, err := h.NewCache()
	must(t, err)
	must(t, h.Alloc(id, 100, 1))
	must(t, h.Leaks())
	h.SetDebug(false)
	if err := h.Leaks(); err == nil || !strings.Contains(err.Error(), "has site") {
		t.Fatalf("a site outside debug mode: %v", err)
	}
}

// TestCheckTrimmedRequiresFrontFlushed (STATS-EXACT, MEM-ACCOUNT): Trim
// flushes the Allocator's own caches first; a snapshot in which a front cache
// still holds a group fails the check after Trim.
// Slip: checkTrimmed looks at the pool and Committed only.
func TestCheckTrimmedRequiresFrontFlushed(t *testing.T) {
	a, err := impl.New(impl.Options{Reserve: 16 * spec.SuperblockSize})
	must(t, err)
	defer a.Close()
	b, err := a.Alloc(64) // a front cache takes a group and holds the rest
	must(t, err)
	defer a.Free(b)
	fires(t, spec.RuleStatsExact, "groups after Flush", invariants.CheckTrimmed(a.Snapshot()))
}

// TestExpectInPlaceFront (REFINES): a small object that no front cache owns
// moves when the Allocator resizes it, even within its class; one its own
// cache resizes within its class stays. The harness is sure of both.
// Slip: the harness is never sure of a Realloc through the Allocator.
func TestExpectInPlaceFront(t *testing.T) {
	h, c := setup(t)
	must(t, h.Alloc(c, 100, 1))
	s := h.A.Snapshot()
	if in, sure := invariants.ExpectInPlace(s, invariants.Front, h.LastAddr, 110); in || !sure {
		t.Errorf("the Allocator resizing cache %d's object: in place %v, sure %v; want a sure move", c, in, sure)
	}
	if in, sure := invariants.ExpectInPlace(s, c, h.LastAddr, 110); !in || !sure {
		t.Errorf("cache %d resizing its own object within its class: in place %v, sure %v; want sure in place", c, in, sure)
	}
}

// TestReportNamesEachField (GUARD-FAULT): a use-after-free report names the
// access, the object, the offset, class and size, and the three stacks; a
// report wrong in any one of them does not name the object.
// Slip: one field (the offset) left out of the comparison.
func TestReportNamesEachField(t *testing.T) {
	e := impl.Quarantined{Addr: 0x10000, Superblocks: 1, Class: 7, Usable: 112}
	good := impl.UseAfterFreeError{Addr: 0x10005, Object: 0x10000, Offset: 5, Size: 112, Class: 7, AllocSite: "a", FreeSite: "f", AccessSite: "x"}
	if !invariants.ReportNames(&good, e, 5) {
		t.Fatalf("the right report: %+v", good)
	}
	for name, f := range map[string]func(r *impl.UseAfterFreeError){
		"addr":     func(r *impl.UseAfterFreeError) { r.Addr++ },
		"object":   func(r *impl.UseAfterFreeError) { r.Object += 16 },
		"offset":   func(r *impl.UseAfterFreeError) { r.Offset++ },
		"size":     func(r *impl.UseAfterFreeError) { r.Size = 128 },
		"class":    func(r *impl.UseAfterFreeError) { r.Class = 8 },
		"alloc":    func(r *impl.UseAfterFreeError) { r.AllocSite = "" },
		"free":     func(r *impl.UseAfterFreeError) { r.FreeSite = "" },
		"access":   func(r *impl.UseAfterFreeError) { r.AccessSite = "" },
		"released": func(r *impl.UseAfterFreeError) { r.Released = true },
	} {
		r := good
		f(&r)
		if invariants.ReportNames(&r, e, 5) {
			t.Errorf("a report with a wrong %s passes: %+v", name, r)
		}
	}
}
