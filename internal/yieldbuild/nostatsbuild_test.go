// As TestPortableBuild: from the README's command, and from the yield build
// cmd/mutants uses (CI's other steps would run it again for nothing).
//go:build !race && !refalloc_check && !refalloc_portable && !refalloc_nostats

package yieldbuild

import "testing"

// TestNoStatsBuild runs impl's and fuzz's suites in the
// refalloc_nostats build, which compiles the class counters out
// (impl.ClassCounters false) for allocbench's cost of the counters. It is a
// documented build tag, so a program may ship with it: everything but those
// counters must hold there as in the default build, and the model holds them
// to 0 (oracle.StatsView's Uncounted). The tests of the counters themselves
// skip there (needClassCounters). impl's tests check every step through
// invariants' harness, so the model's side of that build is run too; the
// rapid machines are not run again (30 s more on CI's budget, for the same
// checks).
func TestNoStatsBuild(t *testing.T) {
	runSuites(t, "impl/stats_off.go", "refalloc_nostats", "refalloc_nostats", "impl", "fuzz")
}
