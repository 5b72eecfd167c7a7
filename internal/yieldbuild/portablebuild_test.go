// Under -race, refalloc_check and refalloc_portable CI runs the portable
// build's tests itself; the refalloc_yield build, which cmd/mutants uses,
// does not replace them, so this runs there too.
//go:build !race && !refalloc_check && !refalloc_portable

package yieldbuild

import "testing"

// TestPortableBuild runs impl's and invariants' whole suites in the
// refalloc_portable build, the front without per-P caches (impl/front_portable.go).
// The default build does not compile that front at all, so without this a
// slip in it (a shard not entered, an alignment dropped, a free of a zero-cap
// slice passed on) would pass the README's command and be seen only by CI's
// separate refalloc_portable step. A mutant switched on stays on in there.
// It builds with refalloc_check too, which only adds assertions: that is
// what sees a shard's cache used without its FRONT-EXCLUSIVE bracket (an
// enter dropped leaves exit's count below zero), which CI's plain portable
// step cannot.
func TestPortableBuild(t *testing.T) {
	runSuites(t, "impl/front_portable.go", "refalloc_portable", "refalloc_portable refalloc_check", "impl", "invariants")
}
