//go:build refalloc_yield

package invariants

import "testing"

// TestExploreChecksFlushed (STATS-EXACT): Explore flushes every cache at the
// end of some rounds and checks that snapshot as flushed (CheckFlushed), as
// its comment says, and its result counts those rounds (by Shared's count
// of flushed checks: adv21's slip explorecheckunflushed flushes and then
// checks the round as unflushed).
func TestExploreChecksFlushed(t *testing.T) {
	cfg := DrawExploreConfig(adv8Seeded(1))
	cfg.Rounds = 40 // a round is flushed one time in 4: some of 40 are, and not all
	res, err := Explore(adv8Seeded(2), cfg)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Violations) > 0 {
		t.Fatal(res.Violations[0])
	}
	if res.Flushed == 0 || res.Flushed == res.Rounds {
		t.Errorf("%d of %d rounds checked after a flush; want some, not all", res.Flushed, res.Rounds)
	}
}
