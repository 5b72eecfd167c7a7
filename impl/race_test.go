package impl_test

import (
	"os/exec"
	"strings"
	"testing"

	"github.com/refalloc/refalloc/internal/mutant"
)

// TestRaceBackendSeesPayload: under -race the payload is a Go-heap arena, so an
// unsynchronized handoff of a block is reported by the race detector, and a
// synchronized one is not; through the Allocator's per-P caches, a block
// reused by another goroutine on the same P is not reported when the first
// one wrote before freeing it, and is when it wrote after. The program runs as
// a subprocess built with -race.
func TestRaceBackendSeesPayload(t *testing.T) {
	// cmd/mutants runs -short: with a mutant on, the race detector is the
	// only judge of some (alignedpopunpinned), so the test runs then too.
	if testing.Short() && mutant.Active() == "" {
		t.Skip("builds a -race binary")
	}
	out, err := raceRun(t, "racy")
	if err == nil || !strings.Contains(out, "WARNING: DATA RACE") || !strings.Contains(out, "racehandoff") {
		t.Fatalf("racy handoff: the detector did not report it (err %v):\n%s", err, out)
	}
	out, err = raceRun(t, "sync")
	if err != nil || strings.Contains(out, "DATA RACE") || !strings.Contains(out, "backend ok") {
		t.Fatalf("synchronized handoff reported or failed (err %v):\n%s", err, out)
	}
	if portable {
		return
	}
	// Through the per-P caches: a block freed on one goroutine and allocated
	// again on another from the same P's cache. The token orders them (pinSync),
	// so a write before the free is not reported; a write after it is.
	out, err = raceRun(t, "afterfree")
	if err == nil || !strings.Contains(out, "WARNING: DATA RACE") || !strings.Contains(out, "racehandoff") {
		t.Fatalf("write after free through the front: the detector did not report it (err %v):\n%s", err, out)
	}
	out, err = raceRun(t, "reuse")
	if err != nil || strings.Contains(out, "DATA RACE") || !strings.Contains(out, "backend ok") {
		t.Fatalf("reuse through the front reported or failed (err %v):\n%s", err, out)
	}
	// FRONT-EXCLUSIVE: an AllocAligned on the P between the two, which no
	// other edge orders: its pop is ordered before the token goes back, so the
	// other goroutine's use of the cache is not reported. Slip (adv16b 22,
	// alignedpopunpinned): the pop after unpin, which the detector reports.
	out, err = raceRun(t, "aligned")
	if err != nil || strings.Contains(out, "DATA RACE") || !strings.Contains(out, "backend ok") {
		t.Fatalf("an AllocAligned on the P before the reuse reported or failed (err %v):\n%s", err, out)
	}
}

// raceRun runs testdata/racehandoff in mode, built with -race and the tags
// given, and the mutant build's tag in a mutant build: the mutant
// REFALLOC_MUTANT names, which the program inherits, is on there too. It
// skips t if there is no go tool.
func raceRun(t *testing.T, mode string, tags ...string) (string, error) {
	t.Helper()
	gotool, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go tool")
	}
	if mutant.Build {
		tags = append(tags, "refalloc_mutants")
	}
	args := []string{"run", "-race"}
	if len(tags) > 0 {
		args = append(args, "-tags", strings.Join(tags, ","))
	}
	out, err := exec.Command(gotool, append(args, "./testdata/racehandoff", "-handoff="+mode)...).CombinedOutput()
	return string(out), err
}
