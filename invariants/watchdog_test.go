package invariants_test

import (
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/refalloc/refalloc/impl"
	"github.com/refalloc/refalloc/invariants"
)

// TestWatchdogFailsAHang: a driver that stops completing operations (here, a
// test that blocks for good with a Harness open, as a deadlock would) fails the
// run within the hang limit, with every goroutine's stack, instead of waiting
// for go test's -timeout, and names the test in a FAIL line. It runs the hang
// in a child process (this test binary, with a 2 s limit).
func TestWatchdogFailsAHang(t *testing.T) {
	if os.Getenv("REFALLOC_HANG_CHILD") != "" {
		h, err := invariants.NewHarness(impl.Options{Reserve: 1 << 20})
		if err != nil {
			t.Fatal(err)
		}
		id, _ := h.NewCache()
		must(t, h.Alloc(id, 100, 1))
		select {} // stuck, as a deadlock would be
	}
	start := time.Now()
	cmd := exec.Command(os.Args[0], "-test.run=^TestWatchdogFailsAHang$")
	cmd.Env = append(os.Environ(), "REFALLOC_HANG_CHILD=1", "REFALLOC_HANG=2s")
	out, err := cmd.CombinedOutput()
	took := time.Since(start)
	switch {
	case err == nil:
		t.Fatalf("the hung child passed:\n%s", out)
	case !strings.Contains(string(out), "no operation completed for 2s") || !strings.Contains(string(out), "goroutine ") ||
		!strings.Contains(string(out), "--- FAIL: TestWatchdogFailsAHang (hung for 2s)"): // named, for go test and cmd/mutants
		t.Fatalf("the child failed without the watchdog's report (%v):\n%s", err, out)
	case took > 30*time.Second:
		t.Fatalf("the watchdog took %v", took)
	}
}
