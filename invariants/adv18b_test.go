package invariants_test

import (
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/refalloc/refalloc/impl"
	"github.com/refalloc/refalloc/invariants"
	"github.com/refalloc/refalloc/oracle"
	"github.com/refalloc/refalloc/spec"
)

// Tests from a second blind round of driver slips (adv18b): each makes one of
// Shared's or the checker's judgements see what it must refuse.

// sharedFires requires a violation of rule saying detail among sh's.
func sharedFires(t *testing.T, sh *invariants.Shared, rule, detail string) {
	t.Helper()
	var got []string
	for _, v := range sh.Violations() {
		if v.Rule == rule && strings.Contains(v.Detail, detail) {
			return
		}
		got = append(got, v.Error())
	}
	t.Fatalf("no %s violation saying %q; got %q", rule, detail, got)
}

// TestSharedChecksFrontFreeError (REFINES: Allocator.Free): Shared refuses an
// error from the Allocator's Free of a live object as it does a cache's: here
// the Allocator was closed behind the model's back (the Go-heap backend, so
// that the object's bytes stay readable).
// Mutant sharedfrontfreeerr: only a cache's Free error is a violation.
func TestSharedChecksFrontFreeError(t *testing.T) {
	sh, err := invariants.NewShared(impl.Options{Reserve: 16 * spec.SuperblockSize, HeapBackend: true})
	must(t, err)
	defer sh.Close() // disarms its watchdog; its ErrClosed comes after the check
	o, ok := sh.Alloc(nil, invariants.Front, 100, 1, 7)
	if !ok {
		t.Fatal("Alloc(100) failed")
	}
	if err := sh.A.Close(); !errors.Is(err, impl.ErrLeaked) { // behind the model's back, o live
		t.Fatalf("Close with an object live: %v", err)
	}
	sh.Free(nil, invariants.Front, o)
	sharedFires(t, sh, spec.RuleRefines, "Free of live object")
}

// TestSharedChecksAllocError (REFINES: Cache.Alloc, Allocator.Alloc): a
// failed allocation's error is judged by the model: ErrClosed from an
// Allocator the model has open is a violation, through a cache and through
// the Allocator's methods.
// Mutant sharedallocerrunjudged: Shared.Alloc returns on any error without asking the model.
func TestSharedChecksAllocError(t *testing.T) {
	sh, err := invariants.NewShared(impl.Options{Reserve: 16 * spec.SuperblockSize})
	must(t, err)
	defer sh.Close()
	c, id, err := sh.OpenCache()
	must(t, err)
	must(t, sh.A.Close()) // behind the model's back
	if _, ok := sh.Alloc(c, id, 100, 1, 7); ok {
		t.Fatal("Alloc on a closed Allocator succeeded")
	}
	sharedFires(t, sh, spec.RuleRefines, "Alloc(100, align 1) returned")
	if _, ok := sh.Alloc(nil, invariants.Front, 200, 1, 7); ok {
		t.Fatal("Alloc on a closed Allocator succeeded")
	}
	sharedFires(t, sh, spec.RuleRefines, "Alloc(200, align 1) returned")
}

// TestSharedCheckSeesWriteAfterFree (DEBUG-POISON): every Check of Shared,
// flushed or not, refuses a write after free the allocator reported: the
// concurrent fuzzer has no OnError, and its barriers check unflushed
// snapshots more often than flushed ones.
// Mutant sharedpoisonflushed: NoFalsePoison recorded at flushed checks only.
func TestSharedCheckSeesWriteAfterFree(t *testing.T) {
	sh, err := invariants.NewShared(impl.Options{Reserve: 16 * spec.SuperblockSize, Debug: true})
	must(t, err)
	defer sh.Close()
	c, id, err := sh.OpenCache()
	must(t, err)
	o, ok := sh.Alloc(c, id, 3000, 1, 9)
	if !ok {
		t.Fatal("Alloc(3000) failed")
	}
	sh.Free(c, id, o)
	o.B[:1][0] ^= 0xff   // after its free: a write after free
	sh.CloseCache(c, id) // its release checks the poison
	sh.Check(false)
	sharedFires(t, sh, spec.RuleDebugPoison, "writes after free reported")
}

// TestGuardLiveObjectRunsIntoQuarantine (GUARD-FAULT): a live large object
// of the model whose first superblock is not quarantined but whose second is
// lies in quarantined memory.
// Mutant guardfirstsbonly: only a live object's first superblock is looked at.
func TestGuardLiveObjectRunsIntoQuarantine(t *testing.T) {
	h, id := guardSetup(t)
	s := clean(t, h)
	quarantined := map[int]bool{}
	for _, st := range s.Superblocks {
		if st.State == impl.SBQuarantine {
			quarantined[st.Index] = true
		}
	}
	at := -1
	for i := range quarantined {
		if i > 0 && !quarantined[i-1] {
			at = i - 1
			break
		}
	}
	if at < 0 {
		t.Fatalf("no quarantined superblock after one that is not: %v", quarantined)
	}
	m := oracle.New(s.Base, s.Size)
	if v := m.OpenCache(id); v != nil {
		t.Fatal(v)
	}
	n := 2 * spec.SuperblockSize
	if v := m.Alloc(id, n, 1, s.Base+uintptr(at*spec.SuperblockSize), n, n, oracle.OK); v != nil {
		t.Fatal(v)
	}
	fires(t, spec.RuleGuardFault, "lies in quarantined superblock", invariants.Check(s, m))
}

// TestExpectInPlaceGuarded (GUARD-FAULT, REFINES): a guarded small object's
// superblock is nobody's, so a Realloc of it moves, even within its class,
// and the harness is sure of it.
// Mutant inplaceguardunsure: the harness is unsure of a guarded object, and one resized in
// place passes.
func TestExpectInPlaceGuarded(t *testing.T) {
	h, id := guardSetup(t)
	s := h.A.Snapshot()
	for _, a := range h.Live() {
		if o, _ := h.M.LiveAt(a); o.Class != spec.Large {
			if in, sure := invariants.ExpectInPlace(s, id, a, o.Size); in || !sure {
				t.Errorf("cache %d resizing its guarded object %#x within its class: in place %v, sure %v; want a sure move", id, a, in, sure)
			}
			return
		}
	}
	t.Fatal("no live guarded small object")
}

// TestFlushedLooksAtEveryFrontCache (STATS-EXACT: Allocator.Flush): after a
// Flush of Front, a group held by any of the Allocator's internal caches is
// reported, whichever it is.
// Mutant flushedfirstfront: the check looks at the first internal cache only.
func TestFlushedLooksAtEveryFrontCache(t *testing.T) {
	a, err := impl.New(impl.Options{Reserve: 16 * spec.SuperblockSize})
	must(t, err)
	defer a.Close()
	if a.FrontCaches() < 2 {
		t.Fatalf("%d internal caches", a.FrontCaches())
	}
	for i := range a.FrontCaches() {
		var b []byte
		a.WithFrontCache(i, func(c *impl.Cache) { b, err = c.Alloc(64) }) // it takes a group and holds the rest
		must(t, err)
		s := a.Snapshot()
		fires(t, spec.RuleStatsExact, "groups after Flush", invariants.Flushed(s, invariants.FlushedIDs(s, invariants.Front)))
		must(t, a.Free(b))
		a.Flush()
	}
}

// TestMemAccountNegativeDecay (MEM-ACCOUNT: Options.Decay < 0): with a
// negative decay the pool returns what it holds past Retain at every release,
// so every committed pooled superblock counts against Retain at once.
// Mutant decaynegnopool: with Decay < 0 no pooled superblock counts, and the tight check
// the fuzzers' pools rely on checks nothing.
func TestMemAccountNegativeDecay(t *testing.T) {
	h, c := setup(t)
	must(t, h.Alloc(c, 100_000, 1))
	must(t, h.Free(c, h.LastAddr))
	s := pooledAgo(t, h, 0)
	s.Decay = -1
	fires(t, spec.RuleMemAccount, "past their decay", invariants.Check(s, h.M))
}

// TestSoakJudgesStatsWhileRunning (LARGE-EXACT, MEM-ACCOUNT: Allocator.Stats):
// the Stats a soak worker reads while the others run is judged (StatsNow),
// and what it refuses reaches the report: here every one read has one large
// allocation too many.
// Mutant soakstatsunjudged: the soak reads Stats but records none of StatsNow's violations.
func TestSoakJudgesStatsWhileRunning(t *testing.T) {
	var read atomic.Int64
	rep, err := invariants.SoakStats(invariants.SoakConfig{
		Goroutines: 2, Duration: time.Millisecond, MinOps: 6000, Reserve: 8 << 20,
		CheckEvery: 5 * time.Millisecond, Seed: 1,
	}, func(st *impl.Stats) {
		read.Add(1)
		st.Large.Allocs++ // Allocs - Frees is no longer LiveObjects
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range rep.Violations {
		if v.Rule == spec.RuleLargeExact && strings.Contains(v.Detail, "large: ") {
			return
		}
	}
	t.Errorf("%d Stats read while the workers ran, each with a large allocation too many; the soak reported none of them:\n%v", read.Load(), rep)
}
