package invariants_test

import (
	"math/bits"
	"slices"
	"strings"
	"testing"

	"github.com/refalloc/refalloc/impl"
	"github.com/refalloc/refalloc/invariants"
	"github.com/refalloc/refalloc/oracle"
	"github.com/refalloc/refalloc/spec"
)

// These tests break a good snapshot on purpose and require the checker to name
// the rule: a check that cannot fail checks nothing.

func setup(t *testing.T) (*invariants.Harness, int) {
	t.Helper()
	h, err := invariants.NewHarness(impl.Options{Reserve: 32 * spec.SuperblockSize})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h.Close() })
	id, err := h.NewCache()
	if err != nil {
		t.Fatal(err)
	}
	return h, id
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// expect runs Check on the broken snapshot and requires a violation of rule.
func expect(t *testing.T, rule string, vs []*invariants.Violation) {
	t.Helper()
	var got []string
	for _, v := range vs {
		if v.Rule == rule {
			return
		}
		got = append(got, v.Error())
	}
	t.Fatalf("no %s violation; got %q", rule, got)
}

func clean(t *testing.T, h *invariants.Harness) *impl.Snapshot {
	t.Helper()
	s := h.A.Snapshot()
	if vs := invariants.Check(s, h.M); len(vs) != 0 {
		t.Fatalf("the unbroken snapshot fails: %v", vs)
	}
	return s
}

// recycled leaves a class-4096 superblock (16 objects, one group) with 11 live
// objects and 5 holes refilled into the held group, and returns the class.
func recycled(t *testing.T, h *invariants.Harness, id int) int {
	var objs []uintptr
	for range 16 {
		must(t, h.Alloc(id, 4096, 1))
		objs = append(objs, h.LastAddr)
	}
	for _, a := range objs[:5] {
		must(t, h.Free(id, a))
	}
	must(t, h.Flush(id))
	must(t, h.Alloc(id, 4096, 1)) // refill takes the 5 holes: 4 held
	return spec.SizeToClass(4096)
}

// TestStatsLeadCatchesCapacityCredit: the published over-count, crediting the
// slab's capacity instead of the transfer at refill, breaks STATS-LEAD.
func TestStatsLeadCatchesCapacityCredit(t *testing.T) {
	h, id := setup(t)
	k := recycled(t, h, id)
	s := clean(t, h)
	s.Stats.Classes[k].Allocs += uint64(spec.ClassObjects(k) - 5) // credited 16, moved 5
	expect(t, spec.RuleStatsLead, invariants.Check(s, h.M))
}

// TestStatsLagCatchesUnpublished: a superblock holding a batch or more of
// unpublished frees, or frees published twice, break STATS-LAG.
func TestStatsLagCatchesUnpublished(t *testing.T) {
	if !impl.ClassCounters {
		t.Skip("the class counters are compiled out (refalloc_nostats): this checker holds them to 0")
	}
	h, id := setup(t)
	k := recycled(t, h, id)
	s := clean(t, h)
	for i := range s.Superblocks {
		if s.Superblocks[i].Class == k {
			s.Superblocks[i].LocalFreed = s.PublishBatch
		}
	}
	expect(t, spec.RuleStatsLag, invariants.Check(s, h.M))
	s = clean(t, h)
	s.Stats.Classes[k].Frees++
	expect(t, spec.RuleStatsLag, invariants.Check(s, h.M))
}

// TestStatsExactCatchesForgottenDebit: after a flush, a debit that was not made
// breaks STATS-EXACT.
func TestStatsExactCatchesForgottenDebit(t *testing.T) {
	if !impl.ClassCounters {
		t.Skip("the class counters are compiled out (refalloc_nostats): this checker holds them to 0")
	}
	h, id := setup(t)
	k := recycled(t, h, id)
	must(t, h.FlushAll())
	s := h.A.Snapshot()
	s.Stats.Classes[k].Allocs += 4
	expect(t, spec.RuleStatsExact, invariants.CheckFlushed(s, h.M))
}

// TestCoherentCatchesStaleMine: an entry that says "mine" with a stale
// generation, class, or owner breaks CACHE-COHERENT.
func TestCoherentCatchesStaleMine(t *testing.T) {
	h, id := setup(t)
	recycled(t, h, id)
	for _, breakIt := range []func(*impl.Entry){
		func(e *impl.Entry) { e.Gen++ },
		func(e *impl.Entry) { e.Class++ },
		func(e *impl.Entry) { e.SameRemote = false },
		func(e *impl.Entry) { e.Mine = false }, // "not mine" for one's own superblock
	} {
		s := clean(t, h)
		found := false
		for ci := range s.Caches {
			for ei := range s.Caches[ci].Entries {
				if s.Caches[ci].Entries[ei].Mine {
					breakIt(&s.Caches[ci].Entries[ei])
					found = true
				}
			}
		}
		if !found {
			t.Fatal("no entry to break")
		}
		expect(t, spec.RuleCacheCoherent, invariants.Check(s, h.M))
	}
}

// TestNoOverlapCatchesOverlap: a large object laid over small ones breaks
// NO-OVERLAP; a misaligned one breaks ALIGN.
func TestNoOverlapCatchesOverlap(t *testing.T) {
	h, id := setup(t)
	recycled(t, h, id)
	s := clean(t, h)
	s.Large = append(s.Large, impl.LargeObject{Addr: s.Superblocks[0].Addr + 8, Usable: 4096, Superblocks: 1})
	vs := invariants.Check(s, h.M)
	expect(t, spec.RuleNoOverlap, vs)
	expect(t, spec.RuleRefines, vs)
}

// TestConserveCatchesLostObject: an object that is in no place (neither free,
// held, pending nor live to the model) or in two breaks CONSERVE and REFINES.
func TestConserveCatchesLostObject(t *testing.T) {
	h, id := setup(t)
	k := recycled(t, h, id)
	s := clean(t, h)
	for i := range s.Superblocks {
		if sb := &s.Superblocks[i]; sb.Class == k && sb.State == impl.SBSmall {
			sb.Free[0] |= 1 << 15 // a live object also marked free
		}
	}
	vs := invariants.Check(s, h.M)
	expect(t, spec.RuleConserve, vs)
	expect(t, spec.RuleRefines, vs)
	s = clean(t, h)
	s.FreeRuns = s.FreeRuns[1:] // superblocks that are neither pooled nor used
	expect(t, spec.RuleConserve, invariants.Check(s, h.M))
}

// TestEmptyCatchesLeftovers: a carved superblock left after free-all breaks EMPTY.
func TestEmptyCatchesLeftovers(t *testing.T) {
	h, id := setup(t)
	recycled(t, h, id)
	s := h.A.Snapshot()
	expect(t, spec.RuleEmpty, invariants.CheckEmpty(s, h.M))
}

// TestOOMCatchesFalseOOM: OOM-REAL refuses an out-of-memory with free runs.
func TestOOMCatchesFalseOOM(t *testing.T) {
	h, id := setup(t)
	recycled(t, h, id)
	expect(t, spec.RuleOOMReal, invariants.CheckOOM(h.A.Snapshot(), []int{id}, 100, 1))
}

// TestFreeDoubleCountsAll: bad frees that Stats does not count break
// FREE-DOUBLE; ExpectFree predicts each kind of free.
func TestFreeDoubleCountsAll(t *testing.T) {
	h, id := setup(t)
	recycled(t, h, id)
	for pick := 0; h.A.Stats().DoubleFrees == 0; pick++ {
		must(t, h.FreeBad(id, invariants.BadDouble, pick))
	}
	s := clean(t, h)
	s.Stats.DoubleFrees = 0
	expect(t, spec.RuleFreeDouble, invariants.Check(s, h.M))

	live := h.Live()[0]
	s = clean(t, h)
	for _, tc := range []struct {
		addr uintptr
		want oracle.Kind
	}{
		{live, oracle.OK},
		{live + 1, oracle.InvalidPointer},
		{0, oracle.OK},
		{s.Base - 4096, oracle.InvalidPointer},
		{s.Base + s.Size, oracle.InvalidPointer},
	} {
		if got := invariants.ExpectFree(s, id, tc.addr); got != tc.want {
			t.Errorf("ExpectFree(%#x) = %v, want %v", tc.addr, got, tc.want)
		}
	}
}

// TestLargeExactCatchesMiscount: LARGE-EXACT is exact at every instant.
func TestLargeExactCatchesMiscount(t *testing.T) {
	h, id := setup(t)
	must(t, h.Alloc(id, 100_000, 1))
	s := clean(t, h)
	s.Stats.Large.LiveBytes -= 4096
	expect(t, spec.RuleLargeExact, invariants.Check(s, h.M))
}

// TestKind maps every sentinel, and refuses an unknown error.
func TestKind(t *testing.T) {
	for err, want := range map[error]oracle.Kind{
		nil: oracle.OK, impl.ErrInvalidSize: oracle.InvalidSize, impl.ErrTooLarge: oracle.TooLarge,
		impl.ErrOutOfMemory: oracle.OutOfMemory, impl.ErrDoubleFree: oracle.DoubleFree,
		impl.ErrInvalidPointer: oracle.InvalidPointer, impl.ErrClosed: oracle.Closed,
	} {
		if got := invariants.Kind(err); got != want {
			t.Errorf("Kind(%v) = %v", err, got)
		}
	}
	defer func() {
		if r := recover(); r == nil || !strings.Contains(r.(string), "no sentinel") {
			t.Errorf("Kind of a foreign error: %v", r)
		}
	}()
	invariants.Kind(impl.ErrLeaked)
}

// TestLifecycleCatchesMisfiled (LIFECYCLE): a superblock with free objects on
// the full list, one on no list, one on two, an empty one kept (owned, or an
// orphan), and an orphan off the orphan list each break the rule.
func TestLifecycleCatchesMisfiled(t *testing.T) {
	h, id := setup(t)
	var objs []uintptr
	for range 40 {
		must(t, h.Alloc(id, 4096, 1)) // 16 a superblock: two full ones and a current
		objs = append(objs, h.LastAddr)
	}
	// The first two superblocks were orphaned full as the next ones were
	// acquired (orphanFull); a free into each adopts it back, partial. The
	// current one filled, the refill takes the second and files the third
	// full: one partial, one full.
	must(t, h.Free(id, objs[0]))
	must(t, h.Free(id, objs[16]))
	for range 9 {
		must(t, h.Alloc(id, 4096, 1))
	}
	s := clean(t, h)
	c := &s.Caches[len(s.Caches)-1]
	k := spec.SizeToClass(4096)
	if len(c.Partial[k]) != 1 || len(c.Full[k]) != 1 {
		t.Fatalf("partial %v full %v", c.Partial[k], c.Full[k])
	}
	partial, full := c.Partial[k][0], c.Full[k][0]
	sb := func(s *impl.Snapshot, i int) *impl.SuperblockState {
		for j := range s.Superblocks {
			if s.Superblocks[j].Index == i {
				return &s.Superblocks[j]
			}
		}
		t.Fatalf("no superblock %d", i)
		return nil
	}
	for name, breakIt := range map[string]func(s *impl.Snapshot){
		"partial on the full list": func(s *impl.Snapshot) {
			c := &s.Caches[len(s.Caches)-1]
			c.Full[k], c.Partial[k] = append(c.Full[k], partial), nil
			sb(s, partial).List = "full"
		},
		"on no list": func(s *impl.Snapshot) { s.Caches[len(s.Caches)-1].Partial[k] = nil },
		"on two lists": func(s *impl.Snapshot) {
			c := &s.Caches[len(s.Caches)-1]
			c.Full[k] = append(c.Full[k], partial)
		},
		"empty and kept": func(s *impl.Snapshot) {
			st := sb(s, partial)
			st.Free[0], st.NFree, st.LocalFreed = 1<<16-1, st.Objects, 0
		},
		"filed as the wrong list": func(s *impl.Snapshot) { sb(s, full).List = "partial" },
		// adv20 (mutant emptyorphankept): an empty orphan, filed right, is
		// released too, not only an empty partial superblock.
		"an empty orphan kept": func(s *impl.Snapshot) {
			st := sb(s, full)
			st.Owner, st.Orphan, st.List = -1, true, "orphan"
			s.Caches[len(s.Caches)-1].Full[k] = nil
			s.Orphans[k] = append(s.Orphans[k], full)
			st.Free[0], st.NFree, st.LocalFreed = 1<<16-1, st.Objects, 0
		},
		"an orphan off the list": func(s *impl.Snapshot) {
			st := sb(s, full)
			st.Owner, st.Orphan, st.List = -1, true, "orphan"
			c := &s.Caches[len(s.Caches)-1]
			c.Full[k] = nil
		},
	} {
		s := clean(t, h)
		breakIt(s)
		t.Run(name, func(t *testing.T) { expect(t, spec.RuleLifecycle, invariants.Check(s, h.M)) })
	}
}

// TestStatsFieldsCatchMiscount: every Stats field the snapshot shows must
// agree with it: the superblock counts by kind, and the event counters, none
// lost when a cache closes (MEM-ACCOUNT, FREE-DOUBLE, FREE-INVALID).
func TestStatsFieldsCatchMiscount(t *testing.T) {
	h, id := setup(t)
	recycled(t, h, id)
	must(t, h.FreeBad(id, invariants.BadInterior, 3))
	other, err := h.NewCache()
	must(t, err)
	must(t, h.FreeBad(other, invariants.BadGoHeap, 1))
	must(t, h.CloseCache(other)) // its invalid free is retired
	for name, breakIt := range map[string]func(s *impl.Snapshot){
		"orphans":           func(s *impl.Snapshot) { s.Stats.OrphanedSuperblocks++ },
		"small superblocks": func(s *impl.Snapshot) { s.Stats.SmallSuperblocks-- },
		"large superblocks": func(s *impl.Snapshot) { s.Stats.LargeSuperblocks++ },
		"a retired counter lost": func(s *impl.Snapshot) {
			s.Retired.InvalidFrees--
		},
		"misses lost":         func(s *impl.Snapshot) { s.Stats.SuperblockCacheMisses++ },
		"writes after free":   func(s *impl.Snapshot) { s.Stats.WriteAfterFrees++ },
		"a batch unpublished": func(s *impl.Snapshot) { s.Caches[0].UnpublishedMisses = 64 },
		"invalid counted as double": func(s *impl.Snapshot) {
			s.Stats.InvalidFrees--
			s.Stats.DoubleFrees++
		},
	} {
		s := clean(t, h)
		breakIt(s)
		t.Run(name, func(t *testing.T) {
			if vs := invariants.Check(s, h.M); len(vs) == 0 {
				t.Fatal("no violation")
			}
		})
	}
}

// TestConserveCatchesUnmergedRuns: two free runs that touch must have been
// merged (CONSERVE): a large allocation needs the longest run there is.
func TestConserveCatchesUnmergedRuns(t *testing.T) {
	h, _ := setup(t)
	s := clean(t, h)
	r := s.FreeRuns[len(s.FreeRuns)-1]
	s.FreeRuns = append(s.FreeRuns[:len(s.FreeRuns)-1], impl.Run{Start: r.Start, N: 1}, impl.Run{Start: r.Start + 1, N: r.N - 1})
	expect(t, spec.RuleConserve, invariants.Check(s, h.M))
}

// TestOOMCatchesWhatWasKept (OOM-REAL): an out-of-memory is refused while the
// cache holds objects, owns an empty superblock, or has remote frees pending,
// and while an orphan is empty or has free objects of the class.
func TestOOMCatchesWhatWasKept(t *testing.T) {
	h, id := setup(t)
	k := recycled(t, h, id)
	s := clean(t, h)
	s.FreeRuns = nil // no room in the pool: only the rest can refuse it
	if vs := invariants.CheckOOM(s, []int{id}, 100, 1); len(vs) == 0 {
		t.Fatal("an OOM with a held group (recycled leaves 4 held) is accepted")
	}
	// The held objects given back, the superblock orphaned: an orphan with
	// free objects of the class.
	c := &s.Caches[len(s.Caches)-1]
	held := c.Held[0]
	c.Held = nil
	for i := range s.Superblocks {
		if st := &s.Superblocks[i]; st.Index == held.Superblock {
			st.Owner, st.Orphan, st.List = -1, true, "orphan"
			st.Free[held.Group] |= held.Bits
			st.NFree += bits.OnesCount32(held.Bits)
		}
	}
	if vs := invariants.CheckOOM(s, []int{id}, spec.ClassSize(k), 1); len(vs) == 0 {
		t.Fatal("an OOM with free objects in an orphan of the class is accepted")
	}
	// ... and an empty superblock the cache owns.
	s = clean(t, h)
	s.FreeRuns = nil
	c = &s.Caches[len(s.Caches)-1]
	c.Held = nil
	for i := range s.Superblocks {
		if st := &s.Superblocks[i]; st.Index == held.Superblock {
			for g := range st.Free {
				st.Free[g] = 0
			}
			st.NFree = st.Objects
		}
	}
	expect(t, spec.RuleOOMReal, invariants.CheckOOM(s, []int{id}, 48, 1))
}

// guardSetup makes a harness in guard mode, every small allocation sampled,
// with a guarded small object and a large one live and one of each freed
// into the quarantine.
func guardSetup(t *testing.T) (*invariants.Harness, int) {
	t.Helper()
	h, err := invariants.NewHarness(impl.Options{Reserve: 32 * spec.SuperblockSize,
		Guard: impl.GuardOptions{Enabled: true, SampleRate: 1, QuarantineObjects: 3}})
	must(t, err)
	t.Cleanup(func() { h.Close() })
	id, err := h.NewCache()
	must(t, err)
	for _, n := range []int{100, 100, 150_000, 150_000} {
		must(t, h.Alloc(id, n, 1))
	}
	live := h.Live()
	must(t, h.Free(id, live[0]))
	must(t, h.Free(id, live[2]))
	if s := h.A.Snapshot(); len(s.Guard.Quarantine) != 2 || s.Stats.Guard.LiveObjects != 1 {
		t.Fatalf("setup: %+v, %+v", s.Guard, s.Stats.Guard)
	}
	return h, id
}

// TestGuardCatchesQuarantineBroken (GUARD-FAULT): a quarantine past its
// bounds, a quarantined superblock the quarantine does not list (or one it
// lists that is not quarantined), a live object in quarantined memory, still
// committed memory in quarantine, wrong guard statistics, a held group when
// every allocation is sampled, and traces of guard mode when it is off.
func TestGuardCatchesQuarantineBroken(t *testing.T) {
	h, id := guardSetup(t)
	check := func(s *impl.Snapshot) []*invariants.Violation { return invariants.Check(s, h.M) }
	quarantined := func(s *impl.Snapshot) *impl.SuperblockState {
		for i := range s.Superblocks {
			if s.Superblocks[i].State == impl.SBQuarantine {
				return &s.Superblocks[i]
			}
		}
		t.Fatal("no quarantined superblock")
		return nil
	}
	s := clean(t, h)
	s.Guard.QuarantineObjects = 1
	expect(t, spec.RuleGuardFault, check(s))
	s = clean(t, h)
	s.Guard.QuarantineBytes = s.SuperblockSize
	expect(t, spec.RuleGuardFault, check(s))
	s = clean(t, h)
	s.Guard.Quarantine = s.Guard.Quarantine[1:]
	expect(t, spec.RuleGuardFault, check(s))
	s = clean(t, h)
	quarantined(s).State = impl.SBPool
	expect(t, spec.RuleGuardFault, check(s))
	s = clean(t, h)
	quarantined(s).Class = 3
	expect(t, spec.RuleGuardFault, check(s))
	if s = clean(t, h); s.Guard.Protects {
		quarantined(s).Dirty = true
		expect(t, spec.RuleGuardFault, check(s))
	}
	s = clean(t, h)
	s.Stats.Guard.QuarantinedBytes += uint64(s.SuperblockSize)
	expect(t, spec.RuleGuardFault, check(s))
	s = clean(t, h)
	s.Stats.Guard.LiveBytes--
	expect(t, spec.RuleGuardFault, check(s))
	s = clean(t, h) // adv20 (mutant guardstatsquarantined): the count of quarantined objects too
	s.Stats.Guard.Quarantined++
	expect(t, spec.RuleGuardFault, check(s))
	s = clean(t, h)
	s.Caches[0].Held = append(s.Caches[0].Held, impl.HeldGroup{Class: 0})
	expect(t, spec.RuleGuardFault, check(s))
	s = clean(t, h)
	s.Guard = impl.GuardState{}
	expect(t, spec.RuleGuardFault, check(s))
	// A live object in a quarantined superblock: the model's, handed out
	// there (the snapshot's own would be a NO-OVERLAP or REFINES matter).
	s = clean(t, h)
	q := s.Guard.Quarantine[0]
	m := oracle.New(s.Base, s.Size)
	if v := m.OpenCache(id); v != nil {
		t.Fatal(v)
	}
	if v := m.Alloc(id, 8, 1, q.Addr, 8, 8, oracle.OK); v != nil {
		t.Fatal(v)
	}
	expect(t, spec.RuleGuardFault, invariants.Check(s, m))
}

// TestGuardOOMCatchesQuarantineKept (OOM-REAL, GUARD-FAULT): running out of
// memory with freed objects still in quarantine is giving up too early.
func TestGuardOOMCatchesQuarantineKept(t *testing.T) {
	h, id := guardSetup(t)
	s := clean(t, h)
	s.FreeRuns = nil
	expect(t, spec.RuleOOMReal, invariants.CheckOOM(s, []int{id}, 100, 1))
}

// TestGuardExpectFree (GUARD-FAULT, FREE-DOUBLE, FREE-INVALID): the snapshot's
// prediction of frees of guarded objects: the start of a live one frees it,
// its interior is invalid, a quarantined one's start is a double free.
func TestGuardExpectFree(t *testing.T) {
	h, id := guardSetup(t)
	s := clean(t, h)
	var live, freed uintptr
	for _, st := range s.Superblocks {
		switch st.State {
		case impl.SBGuard:
			live = st.Addr
		case impl.SBQuarantine:
			if st.GuardSlot {
				freed = st.Addr
			}
		}
	}
	for _, tc := range []struct {
		addr uintptr
		want oracle.Kind
	}{{live, oracle.OK}, {live + 16, oracle.InvalidPointer}, {freed, oracle.DoubleFree}, {freed + 16, oracle.InvalidPointer}} {
		if got := invariants.ExpectFree(s, id, tc.addr); got != tc.want {
			t.Errorf("ExpectFree(%#x) = %v, want %v", tc.addr, got, tc.want)
		}
	}
}

// TestLifecycleCatchesStrandedNotification (LIFECYCLE): a superblock with a
// remote free pending, announced on the stack of a cache that does not own it
// (an idle former owner, which may never drain again), is reported.
func TestLifecycleCatchesStrandedNotification(t *testing.T) {
	h, c := setup(t)
	d, err := h.NewCache()
	must(t, err)
	must(t, h.Alloc(c, 4096, 1))
	must(t, h.Alloc(c, 4096, 1))
	must(t, h.Free(d, h.Live()[0])) // remote: pending, announced on c's stack
	s := clean(t, h)
	var cs, ds *impl.CacheState
	for i := range s.Caches {
		switch s.Caches[i].ID {
		case c:
			cs = &s.Caches[i]
		case d:
			ds = &s.Caches[i]
		}
	}
	if len(cs.Notify) != 1 {
		t.Fatalf("c's stack %v, want the superblock the remote free announced", cs.Notify)
	}
	ds.Notify, cs.Notify = cs.Notify, nil // on d's stack, c still the owner
	vs := invariants.Check(s, h.M)
	if !slices.ContainsFunc(vs, func(v *invariants.Violation) bool { return v.Rule == spec.RuleLifecycle }) {
		t.Fatalf("a notification stranded on a cache that does not own the superblock: %v", vs)
	}
}
