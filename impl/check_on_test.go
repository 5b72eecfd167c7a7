//go:build refalloc_check

package impl

import (
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"unsafe"

	"github.com/refalloc/refalloc/spec"
)

// The refalloc_check build's assertions must fire: no test of the allocator
// ever trips them (it is correct), so without these a slip in a check (a case
// dropped, a comparison turned) would leave the build that is meant to catch
// corruption blind to it, and nothing would notice.

// TestCheckHitCatchesEachStaleField (CACHE-COHERENT): a superblock-cache hit
// is compared with the header field by field. An exact entry passes; a copy
// with any one field stale is named, with the rule, and checkHit panics on it.
// Slips: any case of hitMismatch dropped, or its comparison turned.
func TestCheckHitCatchesEachStaleField(t *testing.T) {
	a, err := New(Options{Reserve: 16 * spec.SuperblockSize})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	c, _ := a.NewCache()
	other, _ := a.NewCache()
	defer other.Close()
	defer c.Close()
	x, _ := c.Alloc(48)
	y, _ := c.Alloc(48)
	if err := c.Free(x); err != nil { // fills the entry: mine
		t.Fatal(err)
	}
	i := (uintptr(unsafe.Pointer(unsafe.SliceData(y))) - a.base) >> spec.SuperblockShift
	e := c.way(i)
	if !e.mine() || e.tag() != i {
		t.Fatalf("no mine entry for superblock %d after a free", i)
	}
	if msg := c.hitMismatch(e); msg != "" {
		t.Fatalf("the exact entry: %s", msg)
	}
	big, _ := c.Alloc(spec.MaxSmall + 1)
	defer c.Free(big)
	bigSB := a.lookup((uintptr(unsafe.Pointer(unsafe.SliceData(big))) - a.base) >> spec.SuperblockShift)
	otherWords := make([]atomic.Uint64, e.nrw)
	stale := []struct {
		name  string
		c     *Cache
		edit  func(s *sbEntry)
		fault string
	}{
		{"tag", c, func(s *sbEntry) { s.key = (i+1)<<1 | 1 }, "entry tag"},
		{"state", c, func(s *sbEntry) {
			gen, _, k := unpackMeta(bigSB.meta.Load())
			s.sb, s.gen, s.class = bigSB, gen, k
			s.key = uintptr(bigSB.idx)<<1 | 1
		}, "header says state"},
		{"class", c, func(s *sbEntry) { s.class++ }, "header says state"},
		{"gen", c, func(s *sbEntry) { s.gen++ }, "header says state"},
		{"owner", other, func(*sbEntry) {}, "header says otherwise"},
		{"rw nil", c, func(s *sbEntry) { s.rw = nil }, "stale remote set"},
		{"rw moved", c, func(s *sbEntry) { s.rw = &otherWords[0] }, "stale remote set"},
		{"nrw", c, func(s *sbEntry) { s.nrw++ }, "stale remote set"},
		{"free", c, func(s *sbEntry) { s.free = &slices.Clone(s.sb.free)[0] }, "stale free bitmap"},
		{"size", c, func(s *sbEntry) { s.size++ }, "stale class fields"},
		{"magic", c, func(s *sbEntry) { s.magic++ }, "stale class fields"},
		{"nobj", c, func(s *sbEntry) { s.nobj-- }, "stale class fields"},
	}
	for _, tc := range stale {
		s := *e
		tc.edit(&s)
		msg := tc.c.hitMismatch(&s)
		if !strings.Contains(msg, spec.RuleCacheCoherent) || !strings.Contains(msg, tc.fault) {
			t.Errorf("stale %s: %q, want %s's %q", tc.name, msg, spec.RuleCacheCoherent, tc.fault)
			continue
		}
		func() {
			defer func() {
				if r := recover(); r != msg {
					t.Errorf("stale %s: checkHit panicked with %v, want %q", tc.name, r, msg)
				}
			}()
			tc.c.checkHit(&s)
		}()
	}
	if err := c.Free(y); err != nil {
		t.Fatal(err)
	}
}

// TestCheckLeadBound (STATS-LEAD): at a refill a cache holds at most one
// group of a class: min(32, the class's objects a superblock) objects. The
// bound itself passes; one more is named, with the rule, and checkLead
// panics. Slips: the bound's comparison turned, or min dropped (a class of
// fewer than 32 objects a superblock could then hold more than it has).
func TestCheckLeadBound(t *testing.T) {
	a, err := New(Options{Reserve: 16 * spec.SuperblockSize})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	c, _ := a.NewCache()
	defer c.Close()
	few := -1
	for k := range spec.NumClasses {
		if spec.ClassObjects(k) < 32 {
			few = k
			break
		}
	}
	if few < 0 {
		t.Fatal("no class has fewer than 32 objects a superblock: pick another bound to test")
	}
	for _, k := range []int{0, few} {
		bound := min(32, spec.ClassObjects(k))
		saved := c.cls[k].bits
		c.cls[k].bits = uint32(1<<bound - 1)
		if msg := c.leadMismatch(k); msg != "" {
			t.Errorf("class %d holding %d (the bound): %s", k, bound, msg)
		}
		if bound < 32 {
			c.cls[k].bits = uint32(1<<(bound+1) - 1)
			msg := c.leadMismatch(k)
			if !strings.Contains(msg, spec.RuleStatsLead) {
				t.Errorf("class %d holding %d, past its bound %d: %q", k, bound+1, bound, msg)
			}
			func() {
				defer func() {
					if r := recover(); r != msg {
						t.Errorf("class %d past its bound: checkLead panicked with %v, want %q", k, r, msg)
					}
				}()
				c.checkLead(k)
			}()
		}
		c.cls[k].bits = saved
	}
}
