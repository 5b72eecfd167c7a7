package impl_test

// Tests of hunt22, an outside examiner's sweep (comparisons flipped, ±1,
// wrong variables, dropped statements) over alloc.go, large.go, stats.go,
// snapshot.go, leaks.go, realloc.go, cache.go and errors.go, aimed at lines
// no mutant switch guards. Each test names its rule and the slip it kills.

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/refalloc/refalloc/impl"
)

// TestNegativeRetainKeepsNone (MEM-ACCOUNT, Options.Retain: "a negative
// value keeps none"): whatever its magnitude. The tests elsewhere pass -1,
// which keeps none even when New takes its magnitude (one byte is less than
// a superblock). Slip: New keeps -Retain bytes for a negative Retain
// (retainnegabs).
func TestNegativeRetainKeepsNone(t *testing.T) {
	a, c := newAllocCache(t, impl.Options{Reserve: 16 * sbBytes, Retain: -8 * sbBytes, Decay: -1})
	if got := a.Snapshot().Retain; got != 0 {
		t.Fatalf("Retain -8 superblocks: Snapshot.Retain %d, want 0", got)
	}
	must(t, c.Free(allocSBs(t, c, 2)))
	if h := held(a); h != 0 {
		t.Fatalf("Retain -8 superblocks, Decay -1: the pool holds %d bytes committed after a free, want 0", h)
	}
	must(t, c.Close())
}

// TestDecayTimerArmedOnce (MEM-ACCOUNT, Options.Decay): while the decay timer
// is pending, a release past Retain arms no other: a workload releasing
// superblocks past Retain all the time (xmalloc-test) would otherwise start a
// timer for each, every one of which takes the central lock to walk the pool
// when it fires. Slip: decayPool arms a timer whether one is pending or not
// (timerrearm).
func TestDecayTimerArmedOnce(t *testing.T) {
	a, c := newAllocCache(t, impl.Options{Reserve: 16 * sbBytes, Retain: -1, Decay: time.Hour})
	var delays []time.Duration
	impl.SetTimerFunc(a, func(d time.Duration, f func()) *time.Timer {
		delays = append(delays, d)
		return time.AfterFunc(time.Hour, f) // never fires in the test
	})
	for range 3 {
		must(t, c.Free(allocSBs(t, c, 1))) // a dirty superblock past Retain (none)
	}
	if len(delays) != 1 {
		t.Fatalf("three releases past Retain, none decayed: the timer was armed %d times (%v), want once", len(delays), delays)
	}
	must(t, c.Close())
}

// TestReallocOfFreedGuardedLeavesNothing (FREE-DOUBLE, GUARD-FAULT,
// CONSERVE): a Realloc of an object already freed, in guard mode, allocates
// its new object (guarded, sampled, reserved) before its own free of b is
// refused, and then frees that object again (Allocator.freeReserved): nothing
// stays live. The reservation check that refuses a free of a reserved
// guarded object as a double free is for the others' frees only. Slip:
// freeLargeLocked refuses the Realloc's own clean-up free too, and the new
// object leaks, live and reserved for good (guardreservedown).
func TestReallocOfFreedGuardedLeavesNothing(t *testing.T) {
	a, c := newAllocCache(t, impl.Options{Reserve: 64 * sbBytes,
		Guard: impl.GuardOptions{Enabled: true, SampleRate: 1}})
	b := allocN(t, c, 100)
	must(t, c.Free(b))
	if _, err := c.Realloc(b, 200); !errors.Is(err, impl.ErrDoubleFree) {
		t.Fatalf("Realloc of a freed guarded object: %v, want ErrDoubleFree", err)
	}
	if g := a.Stats().Guard; g.LiveObjects != 0 || g.LiveBytes != 0 {
		t.Fatalf("after the refused Realloc: %d guarded objects live (%d bytes), want none", g.LiveObjects, g.LiveBytes)
	}
	must(t, c.Close())
}

// TestGuardShrinkTailQuarantinedAsItsBytes (GUARD-FAULT): the superblocks an
// in-place shrink gives back go into quarantine as an object of their own
// bytes, not the whole old run's: the quarantine entry (and the Size of a
// fault report in it) says 2 superblocks of a run shrunk from 3 to 1. Slip:
// the tail's usable size set from the old run length (shrinktailusable).
func TestGuardShrinkTailQuarantinedAsItsBytes(t *testing.T) {
	a := newGuarded(t, impl.GuardOptions{})
	c := mustCache(t, a)
	b, r := shrinkInPlace(t, c)
	found := false
	for _, q := range a.Snapshot().Guard.Quarantine {
		if q.Addr != addrOf(b)+sbBytes {
			continue
		}
		found = true
		if q.Superblocks != 2 || q.Usable != 2*sbBytes {
			t.Errorf("the shrunk tail in quarantine: %d superblocks, %d usable bytes; want 2 and %d", q.Superblocks, q.Usable, 2*sbBytes)
		}
	}
	if !found {
		t.Fatalf("no quarantine entry at the shrunk tail %#x", addrOf(b)+sbBytes)
	}
	must(t, c.Free(r))
}

// TestTooLargeNamesSizeThenReservation (REFINES: ErrTooLarge's message names
// the size and the reservation): each in its place. TestBadInput looks for
// the size anywhere in the message, which a message with the two swapped
// still holds. Slip: errTooLarge formats the reservation as the size and the
// size as the reservation (toolargeswapped).
func TestTooLargeNamesSizeThenReservation(t *testing.T) {
	a, c := newAllocCache(t, impl.Options{Reserve: 16 * sbBytes})
	n := 16*sbBytes + 1
	_, err := c.Alloc(n)
	if !errors.Is(err, impl.ErrTooLarge) {
		t.Fatalf("Alloc(%d) of a %d-byte reservation: %v, want ErrTooLarge", n, 16*sbBytes, err)
	}
	if want := fmt.Sprintf("%d bytes, more than the reservation's %d", n, a.Snapshot().Size); !strings.Contains(err.Error(), want) {
		t.Fatalf("Alloc(%d): %q, want it to say %q", n, err, want)
	}
	must(t, c.Close())
}
