package main

import (
	"bytes"
	"errors"
	"fmt"
	"regexp"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/refalloc/refalloc/impl"
	"github.com/refalloc/refalloc/invariants"
)

// fakeSoak records the configuration refcheck ran and returns a report with
// the given violations (each with the seed it was given) or err.
func fakeSoak(got *invariants.SoakConfig, violations int, err error) func(invariants.SoakConfig) (*invariants.SoakReport, error) {
	return func(cfg invariants.SoakConfig) (*invariants.SoakReport, error) {
		*got = cfg
		if err != nil {
			return nil, err
		}
		rep := &invariants.SoakReport{Config: cfg, Elapsed: time.Second}
		for i := range violations {
			rep.Violations = append(rep.Violations, invariants.SoakViolation{Rule: "CONSERVE", Detail: fmt.Sprint("lost ", i), Seed: cfg.Seed})
		}
		return rep, nil
	}
}

// TestRunExitStatus: refcheck exits 1 on any violation, one included, 2 when
// the soak cannot run or a flag is bad, 0 otherwise (README: "exits non-zero
// on any violation").
func TestRunExitStatus(t *testing.T) {
	for _, tc := range []struct {
		name       string
		args       []string
		violations int
		err        error
		want       int
	}{
		{"clean", nil, 0, nil, 0},
		{"one violation", nil, 1, nil, 1},
		{"three violations", nil, 3, nil, 1},
		{"soak error", nil, 0, errors.New("no reservation"), 2},
		{"bad reserve", []string{"-reserve", "lots"}, 0, nil, 2},
		{"zero reserve", []string{"-reserve", "0KiB"}, 0, nil, 2},
		{"bad retain", []string{"-retain", "-2"}, 0, nil, 2},
		{"unknown flag", []string{"-nope"}, 0, nil, 2},
		{"help", []string{"-h"}, 0, nil, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var cfg invariants.SoakConfig
			var out, errOut bytes.Buffer
			if got := run(tc.args, &out, &errOut, fakeSoak(&cfg, tc.violations, tc.err)); got != tc.want {
				t.Errorf("run(%q) = %d, want %d\nstdout:\n%s\nstderr:\n%s", tc.args, got, tc.want, out.String(), errOut.String())
			}
		})
	}
}

var seedLine = regexp.MustCompile(`^refcheck: seed (\d+) \(replay with -seed (\d+)\)\n`)

// TestRunReplaySeed: the seed refcheck prints first, and in each violation's
// replay column, is the seed the soak ran with: the one -seed gave, or, with
// no -seed, the one drawn from the clock (never the 0 that means "draw one").
func TestRunReplaySeed(t *testing.T) {
	for _, args := range [][]string{{"-seed", "42"}, nil, {"-seed", "0"}} {
		var cfg invariants.SoakConfig
		var out, errOut bytes.Buffer
		if got := run(args, &out, &errOut, fakeSoak(&cfg, 1, nil)); got != 1 {
			t.Fatalf("run(%q) = %d, want 1", args, got)
		}
		if cfg.Seed == 0 {
			t.Errorf("run(%q): the soak ran with seed 0", args)
		}
		if len(args) == 2 && args[1] == "42" && cfg.Seed != 42 {
			t.Errorf("run(%q): the soak ran with seed %d", args, cfg.Seed)
		}
		m := seedLine.FindStringSubmatch(out.String())
		want := fmt.Sprint(cfg.Seed)
		if m == nil || m[1] != want || m[2] != want {
			t.Errorf("run(%q): soak seed %d, first line %q", args, cfg.Seed, strings.SplitN(out.String(), "\n", 2)[0])
		}
		if !strings.Contains(out.String(), "| -seed "+want+" |") {
			t.Errorf("run(%q): no violation with replay -seed %s in\n%s", args, want, out.String())
		}
	}
}

// TestConfigFlags: each flag reaches the soak's configuration.
func TestConfigFlags(t *testing.T) {
	var out, errOut bytes.Buffer
	cfg, err := config([]string{"-duration", "5s", "-goroutines", "3", "-seed", "9", "-reserve", "24MiB",
		"-ways", "32", "-check-every", "7ms", "-debug", "-guard", "10", "-retain", "128KiB"}, &out, &errOut)
	if err != nil {
		t.Fatal(err, errOut.String())
	}
	if cfg.Duration != 5*time.Second || cfg.Goroutines != 3 || cfg.Seed != 9 || cfg.Reserve != 24<<20 ||
		cfg.Ways != 32 || cfg.CheckEvery != 7*time.Millisecond || !cfg.Debug ||
		cfg.Guard != (impl.GuardOptions{Enabled: true, SampleRate: 10}) || cfg.Retain != 128<<10 || cfg.Decay != -1 {
		t.Errorf("config = %+v", cfg)
	}
	if cfg.Progress == nil {
		t.Fatal("no progress line")
	}
	cfg.Progress(invariants.SoakProgress{Elapsed: 2 * time.Second, Ops: 77, Frees: 10, RemoteFrees: 5})
	if !strings.HasPrefix(out.String(), "refcheck    2.0s  ops         77  frees        10 (50.0% remote)") {
		t.Errorf("progress line %q", out.String())
	}

	// The defaults: 3 MiB a goroutine, 16 ways, no debug, guard or pool
	// settings, a seed from the clock.
	cfg, err = config([]string{"-goroutines", "5"}, &out, &errOut)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Duration != 30*time.Second || cfg.Goroutines != 5 || cfg.Seed == 0 || cfg.Reserve != 15<<20 || cfg.Ways != 16 ||
		cfg.CheckEvery != 100*time.Millisecond || cfg.Debug || cfg.Guard.Enabled || cfg.Retain != 0 || cfg.Decay != 0 {
		t.Errorf("config defaults = %+v", cfg)
	}
	if cfg, _ = config(nil, &out, &errOut); cfg.Goroutines != 4*runtime.GOMAXPROCS(0) {
		t.Errorf("default goroutines %d", cfg.Goroutines)
	}

	// -retain -1 keeps nothing; -guard -1 guards large objects only.
	cfg, err = config([]string{"-retain", "-1", "-guard", "-1"}, &out, &errOut)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Retain != -1 || cfg.Decay != -1 || cfg.Guard != (impl.GuardOptions{Enabled: true, SampleRate: -1}) {
		t.Errorf("config -retain -1 -guard -1 = %+v", cfg)
	}
}

func TestParseSize(t *testing.T) {
	for _, tc := range []struct {
		s    string
		want int
	}{{"123", 123}, {"1", 1}, {"64KiB", 64 << 10}, {"24MiB", 24 << 20}, {"1GiB", 1 << 30}, {"3KiB", 3 << 10}} {
		if got, err := parseSize(tc.s); err != nil || got != tc.want {
			t.Errorf("parseSize(%q) = %d, %v; want %d", tc.s, got, err, tc.want)
		}
	}
	for _, s := range []string{"", "0", "-5", "0MiB", "MiB", "24MB", "x", "1.5GiB"} {
		if got, err := parseSize(s); err == nil {
			t.Errorf("parseSize(%q) = %d, want an error", s, got)
		}
	}
}

// TestRunSoak runs the real soak, briefly, through run: wired to
// invariants.Soak, it passes, and prints its summary with the seed given.
func TestRunSoak(t *testing.T) {
	var out, errOut bytes.Buffer
	if got := run([]string{"-duration", "100ms", "-goroutines", "2", "-seed", "5", "-reserve", "8MiB"}, &out, &errOut, invariants.Soak); got != 0 {
		t.Fatalf("run = %d\n%s\n%s", got, out.String(), errOut.String())
	}
	if !strings.Contains(out.String(), "seed 5, reserve 8192 KiB") {
		t.Errorf("summary:\n%s", out.String())
	}
}
