package impl_test

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/refalloc/refalloc/internal/hang"
)

// A hang is a failure within a minute, with every goroutine's stack. impl's
// tests each take seconds (the longest outside the invariants drivers, under
// -race, under ten); one that runs for a minute is stuck: a refill that goes
// round for good at a full reservation (sparseempty), a free waiting on a mark
// nothing clears. go test's own -timeout would wait ten minutes, and
// cmd/mutants counts a timeout as no kill. So the watchdog samples the
// goroutines once a second, and when the same goroutine has been running one
// test (not waiting in t.Run for its subtests) for hangLimit, it prints a FAIL
// line naming the test, as the testing package would, then every goroutine,
// and exits 2. REFALLOC_HANG (a time.Duration) changes the limit, for
// TestWatchdogNamesHungTest.
var hangLimit = time.Minute

func TestMain(m *testing.M) {
	if d, err := time.ParseDuration(os.Getenv("REFALLOC_HANG")); err == nil && d > 0 {
		hangLimit = d
	}
	go watchTests(hangLimit, time.Second)
	os.Exit(m.Run())
}

func watchTests(limit, tick time.Duration) {
	since := map[string]time.Time{} // running test goroutine ("goroutine N") -> first seen
	for now := range time.Tick(tick) {
		stacks := hang.Stacks()
		running := hang.Running(stacks, inInvariants)
		for id := range since {
			if _, ok := running[id]; !ok {
				delete(since, id)
			}
		}
		for id, test := range running {
			t0, ok := since[id]
			if !ok {
				since[id] = now
				continue
			}
			if now.Sub(t0) >= limit {
				hang.Fail(os.Stdout, []string{test}, now.Sub(t0))
				fmt.Fprintf(os.Stderr, "impl: %s made no end for %v (a hang: deadlock or livelock); every goroutine:\n\n%s\n", test, limit, stacks)
				os.Exit(2)
			}
		}
	}
}

// inInvariants: a goroutine inside the invariants package is left to that
// package's watchdog (invariants/watchdog.go), which fires on no operation
// completing, not on time: a test driving a Harness checks every invariant
// after every operation, and under -race the longest (TestStatsExactAfterFlush)
// takes over half a minute of steady progress.
func inInvariants(g []byte) bool {
	return bytes.Contains(g, []byte("\ngithub.com/refalloc/refalloc/invariants."))
}

// TestWatchdogNamesHungTest: a test stuck for good (here in a subtest, as a
// waiter nothing releases would be) fails the run within the limit, with a
// FAIL line naming its top-level test (which cmd/mutants reads) and every
// goroutine's stack. It runs the hang in a child process, with a 2 s limit.
func TestWatchdogNamesHungTest(t *testing.T) {
	if os.Getenv("REFALLOC_HANG_CHILD") != "" {
		t.Run("inner", func(t *testing.T) {
			block := make(chan struct{})
			<-block
		})
		return
	}
	start := time.Now()
	cmd := exec.Command(os.Args[0], "-test.run=^TestWatchdogNamesHungTest$", "-test.v")
	cmd.Env = append(os.Environ(), "REFALLOC_HANG_CHILD=1", "REFALLOC_HANG=2s")
	out, err := cmd.CombinedOutput()
	took := time.Since(start)
	var ee *exec.ExitError
	switch {
	case err == nil:
		t.Fatalf("the hung child passed:\n%s", out)
	case !errors.As(err, &ee) || ee.ExitCode() != 2:
		t.Fatalf("the hung child ended with %v, want exit status 2:\n%s", err, out)
	case !strings.Contains(string(out), "--- FAIL: TestWatchdogNamesHungTest (hung for") ||
		!strings.Contains(string(out), "impl_test.TestWatchdogNamesHungTest.func1("):
		t.Fatalf("the child failed without the watchdog's report:\n%s", out)
	case took > 30*time.Second:
		t.Fatalf("the watchdog took %v", took)
	}
}
