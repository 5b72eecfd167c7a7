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
	"slices"
	"time"

	"github.com/refalloc/refalloc/invariants"
)

type pcg struct{ r *rand.Rand }

func (c pcg) Intn(n int, _ string) int { return c.r.IntN(n) }

func main() {
	runs := flag.Int("runs", 100_000, "runs per trial at most")
	trials := flag.Int("trials", 1, "independent trials (different seed streams)")
	stream := flag.Uint64("stream", 1, "first seed stream")
	verbose := flag.Bool("v", false, "print the failing run's trace")
	flag.Parse()
	var found []int
	var steps []int
	for trial := range uint64(*trials) {
		start := time.Now()
		total := 0
		n := 0
		for ; n < *runs; n++ {
			seed := uint64(n)
			ch := pcg{rand.New(rand.NewPCG(seed, *stream+trial))}
			res, err := invariants.Explore(ch, invariants.DrawExploreConfig(ch))
			if err != nil {
				fmt.Fprintln(os.Stderr, "explore:", err)
				os.Exit(2)
			}
			total += res.Steps
			if len(res.Violations) > 0 {
				fmt.Printf("trial %d (stream %d): found after %d runs, %d scheduling steps, %v: %v\n",
					trial, *stream+trial, n+1, total, time.Since(start).Round(time.Millisecond), res.Violations[0])
				if *verbose {
					fmt.Println(res.Trace)
				}
				found = append(found, n+1)
				steps = append(steps, total)
				break
			}
		}
		if n == *runs {
			fmt.Printf("trial %d (stream %d): nothing in %d runs, %d scheduling steps, %v\n", trial, *stream+trial, n, total, time.Since(start).Round(time.Millisecond))
		}
	}
	if len(found) > 0 {
		slices.Sort(found)
		slices.Sort(steps)
		fmt.Printf("found in %d of %d trials; median %d runs, %d scheduling steps\n", len(found), *trials, found[len(found)/2], steps[len(steps)/2])
	}
	if len(found) != *trials {
		os.Exit(1)
	}
}
