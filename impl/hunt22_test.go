package impl_test

// Tests of hunt22, an outside examiner's sweep (comparisons flipped, ±1,
// wrong variables, dropped statements) over alloc.go, large.go, stats.go,
// snapshot.go, leaks.go, realloc.go, cache.go and errors.go, aimed at lines
// no mutant switch guards. Each test names its rule and the slip it kills.

import (
	"testing"

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
