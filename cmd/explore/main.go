//go:build refalloc_yield

// Command explore runs the interleaving explorer (invariants.Explore) from
// seeded generators, run after run, until it finds a violation or the budget
// is spent, and says after how many runs and scheduling steps. With an injected
// bug it measures how fast the explorer finds that bug from scratch:
//
//	REFALLOC_MUTANT=adoptstale go run -tags 'refalloc_yield refalloc_mutants' ./cmd/explore -trials 5
package main

import (
	"flag"
	"fmt"
	"math/rand/v2"
	"os"

	"github.com/refalloc/refalloc/invariants"
)

type pcg struct{ r *rand.Rand }

func (c pcg) Intn(n int, _ string) int { return c.r.IntN(n) }

func main() {
	runs := flag.Int("runs", 100_000, "runs per trial at most")
	ntrials := flag.Int("trials", 1, "independent trials (different seed streams)")
	stream := flag.Uint64("stream", 1, "first seed stream")
	verbose := flag.Bool("v", false, "print the failing run's trace")
	flag.Parse()
	os.Exit(trials(os.Stdout, os.Stderr, *runs, *ntrials, *stream, *verbose, explore))
}

// explore is one run of the explorer: its configuration and every decision
// drawn from the PCG generator (seed, stream), so that a run replays exactly
// and each trial's stream gives it runs of its own.
func explore(seed, stream uint64) (outcome, error) {
	ch := pcg{rand.New(rand.NewPCG(seed, stream))}
	res, err := invariants.Explore(ch, invariants.DrawExploreConfig(ch))
	if err != nil {
		return outcome{}, err
	}
	o := outcome{steps: res.Steps}
	if len(res.Violations) > 0 {
		o.violation, o.trace = fmt.Sprint(res.Violations[0]), res.Trace
	}
	return o, nil
}
