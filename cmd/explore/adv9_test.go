package main

import (
	"bytes"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"testing"
)

// script is a fake explorer: stream s finds a violation at run find[s] (0:
// never), every run taking 10+seed steps; it records the runs it was asked for.
type script struct {
	find  map[uint64]uint64
	calls []string
}

func (s *script) run(seed, stream uint64) (outcome, error) {
	s.calls = append(s.calls, fmt.Sprintf("%d/%d", stream, seed))
	o := outcome{steps: 10 + int(seed)}
	if f := s.find[stream]; f != 0 && seed+1 == f {
		o.violation, o.trace = fmt.Sprintf("CONSERVE at stream %d", stream), "w0: trace"
	}
	return o, nil
}

// TestTrialsFound: each trial has its own stream (first, first+1, ...), runs
// seeds 0, 1, ... and stops at its first violation; the line says after how
// many runs and steps; the medians are of the sorted counts; all found: 0.
func TestTrialsFound(t *testing.T) {
	s := &script{find: map[uint64]uint64{7: 3, 8: 1, 9: 5}}
	var out, errOut bytes.Buffer
	if got := trials(&out, &errOut, 100, 3, 7, true, s.run); got != 0 {
		t.Fatalf("trials = %d, want 0\n%s", got, out.String())
	}
	if want := "7/0 7/1 7/2 8/0 9/0 9/1 9/2 9/3 9/4"; strings.Join(s.calls, " ") != want {
		t.Errorf("runs %v, want %s", s.calls, want)
	}
	for _, want := range []string{
		"trial 0 (stream 7): found after 3 runs, 33 scheduling steps, ",
		"trial 1 (stream 8): found after 1 runs, 10 scheduling steps, ",
		"trial 2 (stream 9): found after 5 runs, 60 scheduling steps, ",
		": CONSERVE at stream 9\nw0: trace\n",
		"found in 3 of 3 trials; median 3 runs, 33 scheduling steps\n",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("no %q in\n%s", want, out.String())
		}
	}
	out.Reset()
	trials(&out, &errOut, 100, 1, 7, false, s.run)
	if strings.Contains(out.String(), "trace") {
		t.Errorf("a trace without -v:\n%s", out.String())
	}
}

// TestTrialsNotFound: a trial that spends its runs finding nothing says so
// and makes the exit status 1, even when the others found a violation; the
// last run is made (runs is "at most", not "fewer than").
func TestTrialsNotFound(t *testing.T) {
	s := &script{find: map[uint64]uint64{1: 4, 3: 2}}
	var out, errOut bytes.Buffer
	if got := trials(&out, &errOut, 4, 3, 1, false, s.run); got != 1 {
		t.Fatalf("trials = %d, want 1\n%s", got, out.String())
	}
	if want := "1/0 1/1 1/2 1/3 2/0 2/1 2/2 2/3 3/0 3/1"; strings.Join(s.calls, " ") != want {
		t.Errorf("runs %v, want %s", s.calls, want)
	}
	if !regexp.MustCompile(`trial 1 \(stream 2\): nothing in 4 runs, 46 scheduling steps`).MatchString(out.String()) ||
		!strings.Contains(out.String(), "trial 0 (stream 1): found after 4 runs") ||
		!strings.Contains(out.String(), "found in 2 of 3 trials; median 4 runs, 46 scheduling steps") {
		t.Errorf("output:\n%s", out.String())
	}
	out.Reset()
	if got := trials(&out, &errOut, 3, 1, 1, false, s.run); got != 1 || strings.Contains(out.String(), "found in") {
		t.Errorf("nothing found: status %d\n%s", got, out.String())
	}
}

// TestTrialsError: a run that fails stops everything with status 2.
func TestTrialsError(t *testing.T) {
	var out, errOut bytes.Buffer
	n := 0
	got := trials(&out, &errOut, 10, 2, 1, false, func(seed, stream uint64) (outcome, error) {
		n++
		return outcome{}, errors.New("watchdog")
	})
	if got != 2 || n != 1 || !strings.Contains(errOut.String(), "explore: watchdog") {
		t.Errorf("status %d after %d runs, stderr %q", got, n, errOut.String())
	}
}
