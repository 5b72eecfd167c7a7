package invariants_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/refalloc/refalloc/impl"
	"github.com/refalloc/refalloc/invariants"
	"github.com/refalloc/refalloc/spec"
)

// Tests from hunt20's mechanical mutant sweep of the checks: each feeds a
// check the edge of its rule, and requires that check's own report (or its
// silence), not just its rule.

// silent requires that no violation of rule says detail.
func silent(t *testing.T, rule, detail string, vs []*invariants.Violation) {
	t.Helper()
	for _, v := range vs {
		if v.Rule == rule && strings.Contains(v.Detail, detail) {
			t.Fatalf("%s violation %q at the edge the rule allows", rule, v.Detail)
		}
	}
}

// TestStatsLeadHeldBound (STATS-LEAD): a cache may hold up to a superblock's
// worth of a class, and no more. In a superblock of class 4096 (16 objects),
// a held group of exactly 16 objects is not "more than a superblock's" (the
// other checks see what else the forged group breaks); 17 is.
// Slip: the bound is checked with >=, so a cache holding a whole superblock's
// worth is flagged.
func TestStatsLeadHeldBound(t *testing.T) {
	h, c := setup(t)
	k := recycled(t, h, c)
	if spec.ClassObjects(k) != 16 {
		t.Fatalf("class %d has %d objects, want 16", k, spec.ClassObjects(k))
	}
	const more = "more than a superblock's"
	s := clean(t, h)
	cacheOf(t, s, c).Held[0].Bits = 1<<16 - 1
	silent(t, spec.RuleStatsLead, more, invariants.Check(s, h.M))
	s = clean(t, h)
	cacheOf(t, s, c).Held[0].Bits = 1<<17 - 1
	fires(t, spec.RuleStatsLead, "holds 17 objects of class", invariants.Check(s, h.M))
}

// TestHarnessFillsTellObjectsApart (INTEGRITY): the harness fills each object
// it hands out with a byte of its own, never 0 (a zeroed object must not pass
// for a filled one), cycling through the 255 others, so an object that holds
// another's bytes is caught. Here 300 objects of 8 bytes (the fill wraps) all
// have a nonzero fill different from the one before, and an object whose bytes
// are overwritten with its neighbour's fails its free's check.
// Slip: hold's wrap test is inverted (h.fill != 0), so every object is filled
// with 1 and a copy of another object's bytes goes unseen.
func TestHarnessFillsTellObjectsApart(t *testing.T) {
	h, c := setup(t)
	var prev byte
	var objs []uintptr
	for i := range 300 {
		must(t, h.Alloc(c, 8, 1))
		objs = append(objs, h.LastAddr)
		x := h.Object(h.LastAddr)[0]
		if x == 0 || x == prev {
			t.Fatalf("object %d filled with %#x, the one before with %#x", i, x, prev)
		}
		prev = x
	}
	a, b := h.Object(objs[0]), h.Object(objs[1])
	copy(a[:cap(a)], b[:cap(b)])
	var v *invariants.Violation
	if err := h.Free(c, objs[0]); !errors.As(err, &v) || v.Rule != spec.RuleIntegrity {
		t.Fatalf("free of an object holding its neighbour's bytes: %v, want an %s violation", err, spec.RuleIntegrity)
	}
}

// TestSharedStaleFreeInsideLiveObject (FREE-INVALID): a stale free of an
// address inside an object the driver holds, live from before the call to
// after it, may only be refused as ErrInvalidPointer. Here the allocator is
// made to disagree behind Shared's back: the driver's 2-superblock object is
// freed directly and two 1-superblock objects take its place, so the address
// of its second superblock is an object's start to the allocator, whose free
// succeeds. Settle must name that free as one inside a live object.
// Slip: StaleFree marks a free as inside a live object only when the object
// starts at the address freed (o.Addr == x), which is never.
func TestSharedStaleFreeInsideLiveObject(t *testing.T) {
	sh, err := invariants.NewShared(impl.Options{Reserve: 16 * spec.SuperblockSize})
	must(t, err)
	defer sh.Close()
	o, ok := sh.Alloc(nil, invariants.Front, 100_000, 1, 0x11) // 25 pages: 2 superblocks
	if !ok {
		t.Fatal("Alloc failed")
	}
	x := addrOf(o.B)
	must(t, sh.A.Free(o.B)) // behind Shared's back
	p, err := sh.A.Alloc(40_000)
	must(t, err)
	q, err := sh.A.Alloc(40_000)
	must(t, err)
	if addrOf(p) != x || addrOf(q) != x+spec.SuperblockSize {
		t.Fatalf("the 1-superblock objects are at %#x and %#x, want %#x and %#x", addrOf(p), addrOf(q), x, x+spec.SuperblockSize)
	}
	sh.StaleFree(nil, invariants.Front, q) // succeeds: q is the allocator's object
	sh.Settle()
	for _, v := range sh.Violations() {
		if v.Rule == spec.RuleFreeInvalid && strings.Contains(v.Detail, "a free inside a live object returned ok") {
			return
		}
	}
	t.Fatalf("a free inside the live object %#x that succeeded is not reported; got %v", x, sh.Violations())
}

// TestSharedInteriorFreeOnClosedCache (FREE-INVALID, REFINES): a closed cache
// answers every free with ErrClosed before it looks at the pointer, so a stale
// free through it of an address inside a live object is refused as closed,
// which is right, and changes nothing: Settle must accept it, and the object
// stays live for its holder to free.
// Bug (found by hunt20): JudgeAddress required ErrInvalidPointer of every free
// inside a live object, ErrClosed included.
func TestSharedInteriorFreeOnClosedCache(t *testing.T) {
	sh, err := invariants.NewShared(impl.Options{Reserve: 16 * spec.SuperblockSize})
	must(t, err)
	c1, id1, err := sh.OpenCache()
	must(t, err)
	c2, id2, err := sh.OpenCache()
	must(t, err)
	o, ok := sh.Alloc(c1, id1, 100, 1, 0x11)
	if !ok {
		t.Fatal("Alloc failed")
	}
	sh.CloseCache(c2, id2)
	sh.StaleFree(c2, id2, o.B[8:])
	sh.Settle()
	if !sh.Alive(o) {
		t.Error("the object is not live after a refused free inside it")
	}
	sh.Free(c1, id1, o)
	sh.CloseCache(c1, id1)
	sh.Check(true)
	sh.Close()
	if vs := sh.Violations(); len(vs) != 0 {
		t.Fatalf("violations: %v", vs)
	}
}

// TestCloseAllocatorChecksNoLeak (EMPTY): Close that reports no leak while the
// model holds an object live is caught: here the object is freed behind the
// harness's back, so the allocator has nothing live and Close returns nil,
// and the harness must say the model's object was not reported.
// Slip: CloseAllocator zeroes its count of leaked objects when Close fails
// (err != nil) instead of when it succeeds, so a nil Close is checked against
// the model's own count.
func TestCloseAllocatorChecksNoLeak(t *testing.T) {
	h, id := setup(t)
	must(t, h.Alloc(id, 100, 1))
	must(t, h.Cache(id).Free(h.Object(h.LastAddr))) // behind the harness's back
	err := h.CloseAllocator()
	var v *invariants.Violation
	if !errors.As(err, &v) || v.Rule != spec.RuleEmpty {
		t.Fatalf("Close reported no leak, the model holds 1 object live: %v, want an %s violation", err, spec.RuleEmpty)
	}
}

// TestSharedMovedReallocOfReusedAddress (REFINES, INTEGRITY): a moving Realloc
// held before its call while a stale free frees its object and an Alloc
// reuses the address copies the new object's bytes (zero: it was handed out
// while its address was judged later), not the fill its caller left: what it
// kept is Mixed, not checked against the old fill, and there is no violation.
// Slip: checkKept checks the kept bytes of a Mixed object too.
func TestSharedMovedReallocOfReusedAddress(t *testing.T) {
	sh, g := newSh(t, 64)
	o := alloc(t, sh, invariants.Front, 3*sb-100, 0x11)
	f := alloc(t, sh, invariants.Front, sb, 0x12) // after o: no growth in place
	x := addrOf(o.B)
	if addrOf(f.B) != x+3*sb {
		t.Fatalf("the blocker is at %#x, want %#x", addrOf(f.B), x+3*sb)
	}
	h := g.hold(x, invariants.HookCall)
	var r invariants.SharedObj
	var ok bool
	done := async(func() { r, ok = sh.Realloc(nil, invariants.Front, o, 5*sb, 0x22) })
	<-h.reached
	sh.StaleFree(nil, invariants.Front, o.B)
	a := alloc(t, sh, invariants.Front, 3*sb-100, 0x33)
	if addrOf(a.B) != x {
		t.Fatalf("the new object is at %#x, not at %#x", addrOf(a.B), x)
	}
	close(h.release)
	<-done
	if !ok || addrOf(r.B) == x {
		t.Fatalf("the Realloc did not move: ok %v at %#x", ok, addrOf(r.B))
	}
	finish(t, sh, r, a, f)
}

// TestSharedBadFreeKinds (FREE-INVALID): Shared's BadFree makes the bad free
// it names, whatever the goroutines do: kind 0 frees a Go heap slice, kind 1
// another Allocator's object, each refused as ErrInvalidPointer and counted
// by the model as one invalid free, and the allocator's Stats agree.
// Slip: BadFree returns without freeing when the other Allocator's Alloc
// succeeds (err == nil), so the soak never frees a foreign object.
func TestSharedBadFreeKinds(t *testing.T) {
	sh, err := invariants.NewShared(impl.Options{Reserve: 16 * spec.SuperblockSize})
	must(t, err)
	c, id, err := sh.OpenCache()
	must(t, err)
	for kind, want := range []uint64{1, 2} {
		sh.BadFree(c, id, kind, 7)
		if double, invalid := sh.M.BadFreeKinds(); double != 0 || invalid != want {
			t.Fatalf("after BadFree kind %d: %d double, %d invalid frees; want 0 and %d", kind, double, invalid, want)
		}
	}
	sh.CloseCache(c, id)
	sh.Check(true)
	sh.Close()
	report(t, sh)
}

// TestMemAccountDecayEdge (MEM-ACCOUNT): a pooled committed superblock counts
// against Retain once it is kept more than twice its decay: with a decay of
// 100 and Retain 0, one pooled exactly 200 ago is not reported, one pooled 201
// ago is.
// Slip: the decay allowance is checked with >=, so a superblock pooled
// exactly twice its decay ago already counts.
func TestMemAccountDecayEdge(t *testing.T) {
	h, c := setup(t)
	must(t, h.Alloc(c, 100_000, 1))
	must(t, h.Free(c, h.LastAddr))
	const past = "past their decay"
	silent(t, spec.RuleMemAccount, past, invariants.Check(pooledAgo(t, h, 200), h.M))
	fires(t, spec.RuleMemAccount, past, invariants.Check(pooledAgo(t, h, 201), h.M))
}

// TestTrimChecksClosed (REFINES): Trim answers ErrClosed exactly when the
// Allocator is closed: here it is closed behind the harness's back, so the
// model has it open and Trim's ErrClosed is reported.
// Slip: Trim's two conditions joined with && instead of ||, which no error
// satisfies.
func TestTrimChecksClosed(t *testing.T) {
	h, _ := setup(t)
	must(t, h.A.Close()) // behind the harness's back
	err := h.Trim()
	var v *invariants.Violation
	if !errors.As(err, &v) || v.Rule != spec.RuleRefines {
		t.Fatalf("Trim of an Allocator closed behind the model's back: %v, want a %s violation", err, spec.RuleRefines)
	}
}

// TestNoOverlapPastTheEnd (NO-OVERLAP): an object that starts inside the
// reservation and runs past its end is outside it: here a large object of
// two pages whose second page lies beyond the last superblock.
// Slip: the end is computed as a-size instead of a+size, so only objects
// wholly beyond the end are caught.
func TestNoOverlapPastTheEnd(t *testing.T) {
	h, c := setup(t)
	recycled(t, h, c)
	s := clean(t, h)
	a := s.Base + s.Size - spec.PageSize
	s.Large = append(s.Large, impl.LargeObject{Addr: a, Usable: 2 * spec.PageSize, Superblocks: 1})
	fires(t, spec.RuleNoOverlap, fmt.Sprintf("object %#x+%d outside the reservation", a, 2*spec.PageSize), invariants.Check(s, h.M))
}

// TestGuardQuarantineCommittedWithoutProtection (GUARD-FAULT): quarantined
// memory must have been given back to the OS only where guard mode protects
// memory (Guard.Protects); where it cannot (the portable build), a freed
// guarded object is poisoned and its superblock stays committed, which is
// right. Here a quarantined superblock is marked committed in a snapshot that
// says memory is not protected: not reported; with protection, reported.
// Slip: the check ignores Protects and reports every committed quarantined
// superblock (only the portable build would see it).
func TestGuardQuarantineCommittedWithoutProtection(t *testing.T) {
	h, _ := guardSetup(t)
	const committed = "is still committed"
	quarantinedDirty := func(protects bool) *impl.Snapshot {
		s := clean(t, h)
		s.Guard.Protects = protects
		for i := range s.Superblocks {
			if st := &s.Superblocks[i]; st.State == impl.SBQuarantine {
				if !st.Dirty { // decommitted where memory is protected
					st.Dirty = true
					s.Stats.Committed += uint64(s.SuperblockSize)
				}
				return s
			}
		}
		t.Fatal("no quarantined superblock")
		return nil
	}
	silent(t, spec.RuleGuardFault, committed, invariants.Check(quarantinedDirty(false), h.M))
	fires(t, spec.RuleGuardFault, committed, invariants.Check(quarantinedDirty(true), h.M))
}
