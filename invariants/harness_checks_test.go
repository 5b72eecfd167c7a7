package invariants_test

import (
	"errors"
	"slices"
	"testing"
	"unsafe"

	"github.com/refalloc/refalloc/impl"
	"github.com/refalloc/refalloc/invariants"
	"github.com/refalloc/refalloc/spec"
)

// The harness's own checks (harness.go) read what the allocator did, so a
// correct allocator never makes them fire: these tests feed them a snapshot
// or an error broken by hand, as hunt9_test.go does for the checker, and
// require the check's own report. Slips: a check weakened so that it passes
// what it should refuse.

// withMisses is s with cache id's superblock-cache misses raised by n.
func withMisses(s *impl.Snapshot, id int, n uint64) *impl.Snapshot {
	out := *s
	out.Caches = slices.Clone(s.Caches)
	for i := range out.Caches {
		if out.Caches[i].ID == id {
			out.Caches[i].SuperblockCacheMisses += n
		}
	}
	return &out
}

// TestCheckMissEachWay (CACHE-COHERENT, STATS-EXACT: every free counts the
// superblock-cache miss the snapshot before it predicts, on the freeing
// cache and no other): a free by a cache with the superblock's entry (no
// miss expected) and by one without it (a miss expected), each judged with
// the miss counted, not counted, or counted by the other cache too. Slips:
// the count compared with >= or <= instead of ==; a miss counted by another
// cache accepted; the search over ids stopping at the first.
func TestCheckMissEachWay(t *testing.T) {
	a, err := impl.New(impl.Options{Reserve: 16 * spec.SuperblockSize})
	must(t, err)
	defer a.Close()
	owner, _ := a.NewCache()
	other, _ := a.NewCache()
	defer owner.Close()
	defer other.Close()
	x, err := owner.Alloc(64)
	must(t, err)
	must(t, owner.Free(x)) // fills owner's entry for the superblock
	y, err := owner.Alloc(64)
	must(t, err)
	addr := uintptr(unsafe.Pointer(unsafe.SliceData(y)))
	before := a.Snapshot()
	hit, miss := owner.ID(), other.ID()
	if invariants.ExpectMiss(before, hit, addr) || !invariants.ExpectMiss(before, miss, addr) {
		t.Fatalf("set-up: ExpectMiss owner %v, other %v; want false, true",
			invariants.ExpectMiss(before, hit, addr), invariants.ExpectMiss(before, miss, addr))
	}
	for _, tc := range []struct {
		name  string
		ids   []int
		after *impl.Snapshot
		ok    bool
	}{
		{"owner, no miss", []int{hit}, before, true},
		{"owner counts a miss", []int{hit}, withMisses(before, hit, 1), false},
		{"other counts its miss", []int{miss}, withMisses(before, miss, 1), true},
		{"other counts no miss", []int{miss}, before, false},
		{"other counts two", []int{miss}, withMisses(before, miss, 2), false},
		{"owner, another cache counts one", []int{hit}, withMisses(before, miss, 1), false},
		{"other's miss, the owner counts one too", []int{miss}, withMisses(withMisses(before, miss, 1), hit, 1), false},
		{"either, the second counts its miss", []int{hit, miss}, withMisses(before, miss, 1), true},
		{"either, neither fits", []int{hit, miss}, withMisses(before, hit, 1), false},
	} {
		v := invariants.CheckMiss(before, tc.after, tc.ids, addr)
		if tc.ok != (v == nil) {
			t.Errorf("%s: %v, want ok %v", tc.name, v, tc.ok)
		}
		if v != nil && v.Rule != spec.RuleCacheCoherent {
			t.Errorf("%s: rule %s", tc.name, v.Rule)
		}
	}
}

// TestCheckTrimmedEachBreak (MEM-ACCOUNT: after Trim nothing pooled is
// committed and Committed is InUse, plus what guard mode keeps committed in
// quarantine where it cannot protect): a good snapshot after Trim passes; a
// pooled superblock still dirty, one byte too many committed, and a
// quarantined superblock not counted each fire, and a quarantined one
// counted passes. Slips: the pool test or the Committed test dropped or
// weakened; quarantined bytes not added, or added for pooled superblocks.
func TestCheckTrimmedEachBreak(t *testing.T) {
	a, err := impl.New(impl.Options{Reserve: 16 * spec.SuperblockSize})
	must(t, err)
	defer a.Close()
	c, _ := a.NewCache()
	defer c.Close()
	keep, err := c.Alloc(64)
	must(t, err)
	big, err := c.Alloc(3 * spec.SuperblockSize)
	must(t, err)
	must(t, c.Free(big))
	c.Flush()
	must(t, a.Trim())
	good := a.Snapshot()
	if vs := invariants.CheckTrimmed(good); len(vs) != 0 {
		t.Fatalf("a good snapshot after Trim: %v", vs)
	}
	pool := -1
	for i, st := range good.Superblocks {
		if st.State == impl.SBPool && !st.Dirty {
			pool = i
		}
	}
	if pool < 0 {
		t.Fatalf("set-up: no clean pooled superblock after Trim")
	}
	broken := func(f func(s *impl.Snapshot)) *impl.Snapshot {
		s := *good
		s.Superblocks = slices.Clone(good.Superblocks)
		f(&s)
		return &s
	}
	sb := uint64(good.SuperblockSize)
	fires(t, spec.RuleMemAccount, "is still committed", invariants.CheckTrimmed(broken(func(s *impl.Snapshot) {
		s.Superblocks[pool].Dirty = true
		s.Stats.Committed += sb // so that only the pool test can see it
		s.Stats.InUse += sb
	})))
	fires(t, spec.RuleMemAccount, "Committed is", invariants.CheckTrimmed(broken(func(s *impl.Snapshot) { s.Stats.Committed++ })))
	fires(t, spec.RuleMemAccount, "Committed is", invariants.CheckTrimmed(broken(func(s *impl.Snapshot) { s.Stats.Committed-- })))
	quarantine := func(s *impl.Snapshot) {
		s.Superblocks[pool].State = impl.SBQuarantine
		s.Superblocks[pool].Dirty = true
	}
	fires(t, spec.RuleMemAccount, "Committed is", invariants.CheckTrimmed(broken(quarantine)))
	if vs := invariants.CheckTrimmed(broken(func(s *impl.Snapshot) { quarantine(s); s.Stats.Committed += sb })); len(vs) != 0 {
		t.Errorf("a dirty quarantined superblock counted in Committed: %v", vs)
	}
	_ = keep
}

// TestCloseAllocatorChecksLeakCount (EMPTY: Close of an Allocator with live
// objects reports how many): the harness accepts Close's ErrLeaked if, and
// only if, it names exactly the objects the model holds live; ContainsCount does not
// take 13 objects for 3. Slips: CloseAllocator accepts any ErrLeaked, counts
// something else, or ContainsCount drops the count's leading space.
func TestCloseAllocatorChecksLeakCount(t *testing.T) {
	a, err := impl.New(impl.Options{Reserve: 16 * spec.SuperblockSize})
	must(t, err)
	c, _ := a.NewCache()
	for range 13 {
		_, err := c.Alloc(64)
		must(t, err)
	}
	leaked := a.Close()
	if !errors.Is(leaked, impl.ErrLeaked) {
		t.Fatalf("Close with 13 live objects: %v", leaked)
	}
	for n, want := range map[int]bool{13: true, 3: false, 1: false, 14: false, 0: false} {
		if got := invariants.ContainsCount(leaked, n); got != want {
			t.Errorf("ContainsCount(%q, %d) = %v, want %v", leaked, n, got, want)
		}
	}

	h, id := setup(t)
	must(t, h.Alloc(id, 64, 1))
	must(t, h.Alloc(id, 100, 1))
	if err := h.CloseAllocator(); err != nil {
		t.Fatalf("Close with the 2 objects the model holds live: %v", err)
	}

	h, id = setup(t)
	must(t, h.Alloc(id, 64, 1))
	if _, err := h.Cache(id).Alloc(64); err != nil { // one live object the model does not know
		t.Fatal(err)
	}
	err = h.CloseAllocator()
	var v *invariants.Violation
	if !errors.As(err, &v) || v.Rule != spec.RuleEmpty {
		t.Fatalf("Close found 2 objects live, the model 1: %v", err)
	}
}
