// Under -race, refalloc_check and refalloc_portable CI runs the check build's
// tests itself (or has none to add); the refalloc_yield build, which
// cmd/mutants uses, does not compile them, so this runs there too.
//go:build !race && !refalloc_check && !refalloc_portable

package yieldbuild

import (
	"slices"
	"testing"
)

// TestCheckBuild runs every test of a file that only the refalloc_check build
// compiles (impl/check_on_test.go: its assertions must fire), in that build.
// The default build does not compile impl/check_on.go at all, so without this
// a slip in one of its checks (a case dropped, a bound loosened) would pass
// the README's command and be seen only by CI's separate refalloc_check step.
// Only the packages that hold such tests are built.
func TestCheckBuild(t *testing.T) {
	byPkg := tagOnly(t, "refalloc_check")
	names := allNames(byPkg)
	if len(names) < 2 {
		t.Fatalf("found only %d refalloc_check tests (%v): the file scan is broken", len(names), names)
	}
	var pkgs []string
	for _, p := range packages {
		if len(byPkg[p]) > 0 {
			pkgs = append(pkgs, p)
		}
	}
	slices.Sort(pkgs)
	runIn(t, "refalloc_check", names, pkgs)
}
