package impl_test

import (
	"strings"
	"testing"
	"time"

	"github.com/refalloc/refalloc/impl"
	"github.com/refalloc/refalloc/spec"
)

// TestReallocGrowInPlaceAfterOOMFlush (OOM-REAL): a Cache.Realloc growing a
// large object whose next superblocks are the cache's own empty current
// superblock (or, in guard mode, a quarantined object) must not answer
// ErrOutOfMemory when giving those back makes room to grow in place: the
// out-of-memory retry looked again for a new run only, so the same call,
// made again, succeeded in place (review30).
func TestReallocGrowInPlaceAfterOOMFlush(t *testing.T) {
	const sb = spec.SuperblockSize
	for _, guard := range []bool{false, true} {
		t.Run(map[bool]string{false: "current", true: "quarantine"}[guard], func(t *testing.T) {
			opt := impl.Options{Reserve: 16 * sb}
			if guard {
				opt.Guard.Enabled, opt.Guard.SampleRate = true, -1
			}
			a, err := impl.New(opt)
			must(t, err)
			c, err := a.NewCache()
			must(t, err)
			big, err := c.Alloc(8 * sb) // superblocks 0-7
			must(t, err)
			if guard {
				// A freed large object quarantined at superblocks 8-11 (the
				// quarantine's bound: a quarter of the reservation).
				x, err := c.Alloc(4 * sb)
				must(t, err)
				must(t, c.Free(x))
			} else {
				// Superblock 8 the cache's current, empty but for its held group.
				s, err := c.Alloc(64)
				must(t, err)
				s[0] = 1 // dirty: growing over it must clear it
				must(t, c.Free(s))
			}
			big[0] = 7
			r, err := c.Realloc(big, 12*sb)
			if err != nil {
				t.Fatalf("guard %v: Realloc to 12 superblocks of 8 at the start of 16: %v", guard, err)
			}
			if &r[0] != &big[0] || r[0] != 7 {
				t.Fatalf("guard %v: it moved or lost its bytes", guard)
			}
			for i, x := range r[1:cap(r)] {
				if x != 0 {
					t.Fatalf("guard %v: byte %d of the grown object reads %d", guard, 1+i, x)
				}
			}
			must(t, c.Free(r))
			must(t, c.Close())
			must(t, a.Close())
		})
	}
}

// TestGuardShrinkInPlaceLeavesInUse (MEM-ACCOUNT, GUARD-FAULT): the
// superblocks a guarded large object's in-place shrink gives back go to the
// quarantine, which is not in use: LargeSuperblocks and InUse count the one
// superblock the object keeps, also once it is freed (slip: the shrink's
// quarantine left them counted as large, for good).
func TestGuardShrinkInPlaceLeavesInUse(t *testing.T) {
	for _, heap := range []bool{false, true} {
		a, err := impl.New(impl.Options{Reserve: 256 * spec.SuperblockSize, HeapBackend: heap,
			Guard: impl.GuardOptions{Enabled: true, SampleRate: -1}})
		must(t, err)
		c := mustCache(t, a)
		_, r := shrinkInPlace(t, c)
		if s := a.Stats(); s.Guard.QuarantinedBytes != 2*spec.SuperblockSize || s.LargeSuperblocks != 1 || s.InUse != spec.SuperblockSize {
			t.Fatalf("heap %v: after the shrink from 3 superblocks to 1: %d quarantined bytes, %d large superblocks, InUse %d; want 2 superblocks quarantined, 1 in use",
				heap, s.Guard.QuarantinedBytes, s.LargeSuperblocks, s.InUse)
		}
		must(t, c.Free(r))
		if s := a.Stats(); s.LargeSuperblocks != 0 || s.InUse != 0 {
			t.Fatalf("heap %v: after its free: %d large superblocks, InUse %d; want none", heap, s.LargeSuperblocks, s.InUse)
		}
		must(t, c.Close())
		must(t, a.Close())
	}
}

// TestGuardShrinkInPlaceTailNamesStacks (GUARD-FAULT): an access through the
// slice a Realloc shrank in place, past the new object, faults, and the report
// names the shrinking Realloc as the stack that freed the superblocks given
// back and the object's allocation as the one that allocated them (slip: the
// shrink recorded no site, and the report named no freeing stack).
func TestGuardShrinkInPlaceTailNamesStacks(t *testing.T) {
	a := newGuarded(t, impl.GuardOptions{SampleRate: -1})
	needProtect(t, a)
	c := mustCache(t, a)
	b, r := shrinkInPlace(t, c)
	e := touch(a, b, 2*spec.SuperblockSize+3, false)
	if e == nil {
		t.Fatal("a read of the superblocks the shrink gave back did not fault")
	}
	if e.Object != addrOf(b)+spec.SuperblockSize || e.Offset != spec.SuperblockSize+3 ||
		!strings.Contains(e.FreeSite, "shrinkInPlace") || !strings.Contains(e.AllocSite, "shrinkInPlace") {
		t.Fatalf("the report names object %#x offset %d, freed at %q, allocated at %q; want %#x offset %d, both in shrinkInPlace",
			e.Object, e.Offset, e.FreeSite, e.AllocSite, addrOf(b)+spec.SuperblockSize, spec.SuperblockSize+3)
	}
	must(t, c.Free(r))
}

// TestDecayTimerArmedForDecay (MEM-ACCOUNT, Options.Decay): the timer that
// returns what the pool holds past Retain when nothing else happens is armed
// for Decay, no longer: a superblock pooled just after it was armed is
// returned at its second firing at the latest, within twice the decay (slip:
// armed for twice Decay, the suite's timer tests, which wait in real time or
// fire it by hand, passed).
func TestDecayTimerArmedForDecay(t *testing.T) {
	for _, decay := range []time.Duration{time.Hour, time.Millisecond} {
		a, err := impl.New(impl.Options{Reserve: 64 * spec.SuperblockSize, Retain: -1, Decay: decay})
		must(t, err)
		var delays []time.Duration
		impl.SetTimerFunc(a, func(d time.Duration, f func()) *time.Timer {
			delays = append(delays, d)
			return time.AfterFunc(time.Hour, f) // never fires in the test
		})
		c := mustCache(t, a)
		b, err := c.Alloc(spec.MaxSmall + 1)
		must(t, err)
		b[0] = 1
		must(t, c.Free(b)) // one dirty superblock past Retain (none): arms the timer
		must(t, c.Close())
		must(t, a.Close())
		if len(delays) != 1 || delays[0] != decay {
			t.Fatalf("Decay %v: the timer was armed for %v, want once for the decay", decay, delays)
		}
	}
}

// TestQuarantineReleaseKeepsRetain (MEM-ACCOUNT, GUARD-FAULT): superblocks
// leaving the quarantine where guard mode protects come back fresh (they
// were returned to the OS as they went in), so the pool does not count them
// among its committed ones: a pool holding exactly Retain of committed
// superblocks keeps them for good after such a release (slip: pooled counted
// every superblock it was given, fresh ones too, so the pool seemed past
// Retain and its decay returned memory within Retain).
func TestQuarantineReleaseKeepsRetain(t *testing.T) {
	const retain = 4
	a, err := impl.New(impl.Options{Reserve: 64 * sbBytes, Retain: retain * sbBytes, Decay: time.Hour,
		Guard: impl.GuardOptions{Enabled: true, SampleRate: -1, QuarantineObjects: 1, QuarantineBytes: 2 * sbBytes}})
	must(t, err)
	defer a.Close()
	needProtect(t, a)
	clock := time.Now().UnixNano()
	impl.SetClock(a, func() int64 { return clock })
	c := mustCache(t, a)
	defer c.Close()
	x := allocSBs(t, c, retain)
	y, z := allocSBs(t, c, 2), allocSBs(t, c, 2)
	must(t, c.Free(y)) // quarantined, returned to the OS
	must(t, c.Free(z)) // quarantined in y's place: y's superblocks come back fresh
	must(t, c.Free(x)) // past the quarantine's bytes: the pool holds exactly Retain committed
	if h := held(a); h != retain*sbBytes {
		t.Fatalf("the pool holds %d bytes committed, want Retain, %d", h, retain*sbBytes)
	}
	clock += int64(2 * time.Hour)
	impl.FireDecayTimer(a)
	if h := held(a); h != retain*sbBytes {
		t.Fatalf("two decays on, the pool holds %d bytes committed, want all %d of Retain kept", h, retain*sbBytes)
	}
}
