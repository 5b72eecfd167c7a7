// Under -race, and in the builds that already have (or replace) these tests,
// there is nothing to add: CI runs them there itself.
//go:build !race && !refalloc_yield && !refalloc_check && !refalloc_portable

package yieldbuild

import "testing"

// TestYieldBuild runs every test and fuzz target (its seeds) of a file that
// only the refalloc_yield build compiles, in that build. A mutant switched on
// (cmd/mutants in its default-build mode) is switched on in there too.
func TestYieldBuild(t *testing.T) {
	names := allNames(tagOnly(t, "refalloc_yield"))
	if len(names) < 20 {
		t.Fatalf("found only %d refalloc_yield tests (%v): the file scan is broken", len(names), names)
	}
	runIn(t, "refalloc_yield", names, packages)
}
