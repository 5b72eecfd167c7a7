package impl_test

// Tests of hunt22, an outside examiner's sweep (comparisons flipped, ±1,
// wrong variables, dropped statements) over alloc.go, large.go, stats.go,
// snapshot.go, leaks.go, realloc.go, cache.go and errors.go, aimed at lines
// no mutant switch guards. Each test names its rule and the slip it kills.

import (
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
