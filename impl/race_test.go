package impl_test

import (
	"os/exec"
	"strings"
	"testing"
)

// TestRaceBackendSeesPayload: under -race the payload is a Go-heap arena, so an
// unsynchronized handoff of a block is reported by the race detector, and a
// synchronized one is not; through the Allocator's per-P caches, a block
// reused by another goroutine on the same P is not reported when the first
// one wrote before freeing it, and is when it wrote after. The program runs as
// a subprocess built with -race.
func TestRaceBackendSeesPayload(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a -race binary")
	}
	gotool, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go tool")
	}
	run := func(mode string) (string, error) {
		out, err := exec.Command(gotool, "run", "-race", "./testdata/racehandoff", "-handoff="+mode).CombinedOutput()
		return string(out), err
	}
	out, err := run("racy")
	if err == nil || !strings.Contains(out, "WARNING: DATA RACE") || !strings.Contains(out, "racehandoff") {
		t.Fatalf("racy handoff: the detector did not report it (err %v):\n%s", err, out)
	}
	out, err = run("sync")
	if err != nil || strings.Contains(out, "DATA RACE") || !strings.Contains(out, "backend ok") {
		t.Fatalf("synchronized handoff reported or failed (err %v):\n%s", err, out)
	}
	if portable {
		return
	}
	// Through the per-P caches: a block freed on one goroutine and allocated
	// again on another from the same P's cache. The token orders them (pinSync),
	// so a write before the free is not reported; a write after it is.
	out, err = run("afterfree")
	if err == nil || !strings.Contains(out, "WARNING: DATA RACE") || !strings.Contains(out, "racehandoff") {
		t.Fatalf("write after free through the front: the detector did not report it (err %v):\n%s", err, out)
	}
	out, err = run("reuse")
	if err != nil || strings.Contains(out, "DATA RACE") || !strings.Contains(out, "backend ok") {
		t.Fatalf("reuse through the front reported or failed (err %v):\n%s", err, out)
	}
}
