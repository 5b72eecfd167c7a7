package fuzz

import (
	"strings"
	"testing"

	"github.com/refalloc/refalloc/invariants"
	"github.com/refalloc/refalloc/spec"
)

// TestConcurrentChecksEmpty: RunConcurrent checks EMPTY at its end. An object
// left live after every worker freed its own and closed its cache (a test
// allocates it there) makes the program fail with an EMPTY violation.
func TestConcurrentChecksEmpty(t *testing.T) {
	concEnd = func(sh *invariants.Shared, _ concCounts) {
		if _, ok := sh.Alloc(nil, invariants.Front, 100, 1, 7); !ok {
			t.Fatal("Alloc(100) failed")
		}
	}
	defer func() { concEnd = nil }()
	err := RunConcurrent([]byte{0, 0, COpAlloc, 10, 1, 1, COpBarrier, 1, 0})
	// CheckEmpty's own words: Close's report of the leak is not the check.
	if err == nil || !strings.Contains(err.Error(), "1 objects live (model: 1)") {
		t.Fatalf("RunConcurrent with an object left live: %v; want CheckEmpty's %s violation", err, spec.RuleEmpty)
	}
}
