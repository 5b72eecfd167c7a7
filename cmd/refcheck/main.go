// Command refcheck is the soak run of refalloc against its model: many
// goroutines allocate, hand blocks to each other and free them (scattered remote
// frees) in a small reservation, while barriers check a snapshot of the allocator
// against the model about ten times a second. It prints a progress line about
// once a second and a summary table at the end, and exits with status 1 on any
// violation (each printed with its rule ID and the seed that replays it).
//
//	go run ./cmd/refcheck                       # 30 s, 4×GOMAXPROCS goroutines
//	go run ./cmd/refcheck -duration 10m -seed 42 -reserve 64MiB
//	go run ./cmd/refcheck -guard 10                 # guard mode, 1 small allocation in 10 guarded
//	go run ./cmd/refcheck -retain 128KiB            # the pool returns memory at every release past 128 KiB
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"runtime"
	"strconv"
	"strings"
	"time"

	"github.com/refalloc/refalloc/impl"
	"github.com/refalloc/refalloc/internal/mutant"
	"github.com/refalloc/refalloc/invariants"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr, invariants.Soak))
}

// run is refcheck with its arguments, its output and the soak it runs: it
// returns the exit status, 1 on any violation, 2 on a bad flag or a soak that
// could not start, else 0.
func run(args []string, stdout, stderr io.Writer, soak func(invariants.SoakConfig) (*invariants.SoakReport, error)) int {
	cfg, err := config(args, stdout, stderr)
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	if err != nil {
		return 2
	}
	fmt.Fprintf(stdout, "refcheck: seed %d (replay with -seed %d)\n", cfg.Seed, cfg.Seed)
	rep, err := soak(cfg)
	if err != nil {
		fmt.Fprintln(stderr, "refcheck:", err)
		return 2
	}
	fmt.Fprintln(stdout)
	fmt.Fprint(stdout, rep)
	if len(rep.Violations) > 0 {
		return 1
	}
	return 0
}

// config parses the flags into the soak's configuration, with a seed drawn
// from the clock when -seed is 0; an error is printed to stderr.
func config(args []string, stdout, stderr io.Writer) (invariants.SoakConfig, error) {
	fs := flag.NewFlagSet("refcheck", flag.ContinueOnError)
	fs.SetOutput(stderr)
	duration := fs.Duration("duration", 30*time.Second, "how long to run")
	goroutines := fs.Int("goroutines", 4*runtime.GOMAXPROCS(0), "worker goroutines, each with its own cache")
	seed := fs.Uint64("seed", 0, "seed of the workers' operations (0: from the clock)")
	reserve := fs.String("reserve", "", "reservation size, e.g. 24MiB (default: 3 MiB per goroutine)")
	ways := fs.Int("ways", 16, "superblock-cache ways: 1, 8, 16, 32, 64 or 128 (0: the default, 128)")
	every := fs.Duration("check-every", 100*time.Millisecond, "time between invariant checks")
	debug := fs.Bool("debug", false, "debug mode: freed memory poisoned, writes after free reported (none is made)")
	guard := fs.Int("guard", 0, "guard mode, sampling one small allocation in this many (0: off; -1: large objects only)")
	retain := fs.String("retain", "", "Options.Retain, e.g. 128KiB (empty: impl's default; -1: keep none); the pool returns what it holds past it at every release")
	if err := fs.Parse(args); err != nil {
		return invariants.SoakConfig{}, err
	}

	cfg := invariants.SoakConfig{
		Goroutines: *goroutines, Duration: *duration, Seed: *seed, Ways: *ways, CheckEvery: *every, Debug: *debug,
		Reserve: 3 << 20 * max(*goroutines, 1),
		Progress: func(p invariants.SoakProgress) {
			fmt.Fprintf(stdout, "refcheck %6.1fs  ops %10d  frees %9d (%4.1f%% remote)  oom %7d  live %6d  checks %5d  violations %d\n",
				p.Elapsed.Seconds(), p.Ops, p.Frees, 100*float64(p.RemoteFrees)/float64(max(p.Frees, 1)), p.OOMs, p.Live, p.Checks, p.Violations)
		},
	}
	if mutant.RefcheckWays {
		cfg.Ways = 16
	}
	if *guard != 0 {
		cfg.Guard = impl.GuardOptions{Enabled: true, SampleRate: *guard}
	}
	if *reserve != "" {
		n, err := parseSize(*reserve)
		if err != nil {
			fmt.Fprintln(stderr, "refcheck: -reserve:", err)
			return cfg, err
		}
		cfg.Reserve = n
	}
	if *retain != "" {
		n := -1
		if *retain != "-1" {
			var err error
			if n, err = parseSize(*retain); err != nil {
				fmt.Fprintln(stderr, "refcheck: -retain:", err)
				return cfg, err
			}
		}
		cfg.Retain, cfg.Decay = n, -1
	}
	if cfg.Seed == 0 {
		cfg.Seed = uint64(time.Now().UnixNano())
	}
	return cfg, nil
}

// parseSize reads 123, 64KiB, 24MiB, 1GiB.
func parseSize(s string) (int, error) {
	mult := 1
	for suf, m := range map[string]int{"KiB": 1 << 10, "MiB": 1 << 20, "GiB": 1 << 30} {
		if strings.HasSuffix(s, suf) {
			s, mult = strings.TrimSuffix(s, suf), m
			break
		}
	}
	n, err := strconv.Atoi(s)
	if err != nil || n <= 0 {
		return 0, fmt.Errorf("%q is not a size like 24MiB", s)
	}
	return n * mult, nil
}
