package invariants_test

import (
	"flag"
	"os"
	"testing"

	"pgregory.net/rapid"

	"github.com/refalloc/refalloc/internal/mutant"

	"github.com/refalloc/refalloc/invariants"
)

// defaultSteps is how many actions a machine runs per check unless -rapid.steps
// (or RAPID_STEPS) says otherwise: deep enough that superblocks fill, empty,
// return to the pool and come back with holes, which is where the published
// over-count of STATS-LEAD lives (rapid's own default is 30).
const defaultSteps = "300"

func TestMain(m *testing.M) {
	flag.Parse()
	set := os.Getenv("RAPID_STEPS") != ""
	flag.Visit(func(f *flag.Flag) { set = set || f.Name == "rapid.steps" })
	if mutant.Active() != "" {
		// Under an injected bug (cmd/mutants): no fail files in the tree, and
		// a kill need not wait for rapid to shrink it.
		flag.Set("rapid.nofailfile", "true")
		flag.Set("rapid.shrinktime", "2s")
	}
	if !set {
		flag.Set("rapid.steps", defaultSteps)
	}
	os.Exit(m.Run())
}

// TestMachine checks STATS-LEAD, STATS-LAG, STATS-EXACT, CACHE-COHERENT,
// NO-OVERLAP, ALIGN, ZEROED, INTEGRITY, CONSERVE, FREE-DOUBLE, FREE-INVALID,
// EMPTY, REFINES, OOM-REAL, LARGE-EXACT and MEM-ACCOUNT after every step,
// over the whole API: Alloc, AllocAligned, Realloc, Free, Flush and Close of
// caches, and the Allocator's Alloc, Realloc, Free, Flush, Trim, Stats and
// Leaks.
func TestMachine(t *testing.T) {
	rapid.Check(t, invariants.RunMachine)
}
