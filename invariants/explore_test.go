//go:build refalloc_yield

package invariants_test

import (
	"math/rand/v2"
	"os"
	"strconv"
	"testing"

	"pgregory.net/rapid"

	"github.com/refalloc/refalloc/invariants"
)

// rapidChooser takes the explorer's decisions from rapid, which shrinks a
// failing run to a short schedule.
type rapidChooser struct{ t *rapid.T }

func (c rapidChooser) Intn(n int, label string) int { return rapid.IntRange(0, n-1).Draw(c.t, label) }

// pcgChooser takes them from a seeded generator.
type pcgChooser struct{ r *rand.Rand }

func (c pcgChooser) Intn(n int, _ string) int { return c.r.IntN(n) }

func explore(t interface{ Fatalf(string, ...any) }, ch invariants.Chooser) {
	res, err := invariants.Explore(ch, invariants.DrawExploreConfig(ch))
	if err != nil {
		t.Fatalf("%v", err)
	}
	if len(res.Violations) > 0 {
		t.Fatalf("%v\n%s", res.Violations, res.Trace)
	}
}

// TestExplore (CACHE-COHERENT, FREE-DOUBLE, NO-OVERLAP, INTEGRITY, DEBUG-POISON):
// the interleaving explorer as a rapid property: 2 to 4 goroutines run one
// segment at a time, rapid choosing the operations and, at every yield point
// inside impl, which goroutine goes on; each round's calls are judged at its
// quiescent end (stale frees per address, every live object's bytes, every
// invariant). A failure shrinks to a short schedule and replays from its seed.
func TestExplore(t *testing.T) {
	if testing.Short() {
		// rapid draws a new seed each run, and -short runs (cmd/mutants) want
		// kills that repeat: TestExploreSeeds explores from fixed seeds.
		t.Skip("random seeds in -short mode; see TestExploreSeeds")
	}
	rapid.Check(t, func(t *rapid.T) { explore(t, rapidChooser{t}) })
}

// TestExploreSeeds runs the explorer from seeded generators: many cheap runs.
func TestExploreSeeds(t *testing.T) {
	n := 200
	if testing.Short() {
		n = 20
	}
	if v := os.Getenv("EXPLORE_RUNS"); v != "" {
		n, _ = strconv.Atoi(v)
	}
	for seed := range uint64(n) {
		res, err := invariants.Explore(pcgChooser{rand.New(rand.NewPCG(seed, 9))}, invariants.DrawExploreConfig(pcgChooser{rand.New(rand.NewPCG(seed, 8))}))
		if err != nil {
			t.Fatal(err)
		}
		if len(res.Violations) > 0 {
			t.Fatalf("seed %d: %v\n%s", seed, res.Violations, res.Trace)
		}
	}
}
