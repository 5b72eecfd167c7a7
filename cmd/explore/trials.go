package main

import (
	"fmt"
	"io"
	"slices"
	"time"
)

// outcome is one run of the explorer: its scheduling steps, and its first
// violation (empty: none) with the run's trace.
type outcome struct {
	steps            int
	violation, trace string
}

// trials runs up to runs runs in each of n trials, trial i drawing run r from
// seed r of stream first+i, until a run finds a violation; it prints a line
// per trial and the medians, and returns the exit status: 0 when every trial
// found a violation, 1 when one did not, 2 when a run failed.
func trials(w, errw io.Writer, runs, n int, first uint64, verbose bool, run func(seed, stream uint64) (outcome, error)) int {
	var found []int
	var steps []int
	for trial := range uint64(n) {
		start := time.Now()
		total := 0
		r := 0
		for ; r < runs; r++ {
			res, err := run(uint64(r), first+trial)
			if err != nil {
				fmt.Fprintln(errw, "explore:", err)
				return 2
			}
			total += res.steps
			if res.violation != "" {
				fmt.Fprintf(w, "trial %d (stream %d): found after %d runs, %d scheduling steps, %v: %s\n",
					trial, first+trial, r+1, total, time.Since(start).Round(time.Millisecond), res.violation)
				if verbose {
					fmt.Fprintln(w, res.trace)
				}
				found = append(found, r+1)
				steps = append(steps, total)
				break
			}
		}
		if r == runs {
			fmt.Fprintf(w, "trial %d (stream %d): nothing in %d runs, %d scheduling steps, %v\n", trial, first+trial, r, total, time.Since(start).Round(time.Millisecond))
		}
	}
	if len(found) > 0 {
		slices.Sort(found)
		slices.Sort(steps)
		fmt.Fprintf(w, "found in %d of %d trials; median %d runs, %d scheduling steps\n", len(found), n, found[len(found)/2], steps[len(steps)/2])
	}
	if len(found) != n {
		return 1
	}
	return 0
}
