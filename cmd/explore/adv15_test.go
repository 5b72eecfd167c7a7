//go:build refalloc_yield

package main

import (
	"math/rand/v2"
	"testing"

	"github.com/refalloc/refalloc/invariants"
)

// TestExploreDrawsFromSeedAndStream: a run of the explorer is the one that
// the PCG generator (seed, stream) draws, so that -stream and -trials give
// each trial runs of its own and a run replays from its seed and stream.
// adv15 slip 08 seeded the generator (seed, seed): every trial then ran the
// same runs whatever its stream, and -trials 5 measured one trial five times;
// only trials' own logic (with a fake run) was tested.
func TestExploreDrawsFromSeedAndStream(t *testing.T) {
	steps := map[int]bool{}
	for seed := range uint64(3) {
		for _, stream := range []uint64{1, 2} {
			got, err := explore(seed, stream)
			if err != nil {
				t.Fatal(err)
			}
			ch := pcg{rand.New(rand.NewPCG(seed, stream))}
			want, err := invariants.Explore(ch, invariants.DrawExploreConfig(ch))
			if err != nil {
				t.Fatal(err)
			}
			if got.steps != want.Steps {
				t.Errorf("explore(%d, %d): %d scheduling steps, the explorer with PCG(%d, %d) takes %d", seed, stream, got.steps, seed, stream, want.Steps)
			}
			steps[want.Steps] = true
		}
	}
	if len(steps) < 2 {
		t.Fatalf("six seeds and streams all took the same number of steps (%v): the test cannot tell them apart", steps)
	}
}
