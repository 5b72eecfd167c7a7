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

// raceChecks is how many checks a machine runs under -race, unless
// -rapid.checks (or RAPID_CHECKS) says otherwise.
const raceChecks = "30"

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
	checks := os.Getenv("RAPID_CHECKS") != ""
	flag.Visit(func(f *flag.Flag) { checks = checks || f.Name == "rapid.checks" })
	if raceEnabled && !checks {
		// The machines run on one goroutine, where the race detector has
		// nothing to find and costs 5×: under -race they take a smoke pass
		// (CI's 25 minutes), and the full 100 checks run in every other build.
		flag.Set("rapid.checks", raceChecks)
	}
	os.Exit(m.Run())
}

// TestMachine checks STATS-LEAD, STATS-LAG, STATS-EXACT, CACHE-COHERENT,
// NO-OVERLAP, ALIGN, ZEROED, INTEGRITY, CONSERVE, FREE-DOUBLE, FREE-INVALID,
// EMPTY, REFINES, OOM-REAL, LARGE-EXACT, MEM-ACCOUNT and, in a third of its
// runs (guard mode), GUARD-FAULT after every step, over the whole API: Alloc,
// AllocAligned, Realloc, Free, Flush and Close of caches, and the Allocator's
// Alloc, Realloc, Free, Flush, Trim, Stats and Leaks; its touchFreed action
// reads or writes a freed object in quarantine, which must fault and be
// reported.
func TestMachine(t *testing.T) {
	rapid.Check(t, invariants.RunMachine)
}
