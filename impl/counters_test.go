package impl_test

import (
	"testing"

	"github.com/refalloc/refalloc/impl"
)

// needClassCounters skips a test of the per-class Allocs and Frees counters in
// the refalloc_nostats build, which compiles them out (impl.ClassCounters).
// The rest of the suite runs there too, and the model holds those counters
// to 0 (oracle.StatsView's Uncounted).
func needClassCounters(t testing.TB) {
	t.Helper()
	if !impl.ClassCounters {
		t.Skip("the class counters are compiled out (refalloc_nostats)")
	}
}
