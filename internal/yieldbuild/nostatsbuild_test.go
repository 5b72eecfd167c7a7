// The nostats build is a measurement build of its own: the other builds' CI
// steps do not combine with it, so this runs from each of them but the race
// run (where the suites it starts would run without the detector anyway).
//go:build !race && !refalloc_nostats

package yieldbuild

import (
	"go/parser"
	"go/token"
	"testing"
)

// TestNoStatsBuild runs impl's, invariants' and fuzz's suites in the
// refalloc_nostats build, which compiles the class counters out
// (impl.ClassCounters false) for allocbench's cost of the counters. It is a
// documented build tag, so a program may ship with it: everything but those
// counters must hold there as in the default build, and the model holds them
// to 0 (oracle.StatsView's Uncounted). The tests of the counters themselves
// skip there (needClassCounters).
func TestNoStatsBuild(t *testing.T) {
	f, err := parser.ParseFile(token.NewFileSet(), "../../impl/stats_off.go", nil, parser.ParseComments|parser.PackageClauseOnly)
	if err != nil {
		t.Fatal(err)
	}
	if !needsTag(t, f, "refalloc_nostats") {
		t.Fatal("impl/stats_off.go is not compiled by the refalloc_nostats tag alone: this runner builds the counted build")
	}
	runIn(t, "refalloc_nostats", nil, []string{"../../impl", "../../invariants", "../../fuzz"})
}
