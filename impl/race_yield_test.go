//go:build refalloc_yield

package impl_test

import (
	"strings"
	"testing"

	"github.com/refalloc/refalloc/internal/mutant"
)

// TestRaceOrphanDrainReadsOwnerFirst (LIFECYCLE): the orphans' drain finds
// on the orphans' stack a superblock that another cache adopted and relisted
// outside the central lock, with no happens-before edge to that relisting
// (testdata/racehandoff -handoff=orphandrain, which pauses a remote free at a
// yield point to set this up, so it needs this build). The drain reads the
// owner first and leaves the list alone, so the race detector reports
// nothing. Slip (adv16b 30, orphandrainlistfirst): it reads the list first,
// which the detector reports.
func TestRaceOrphanDrainReadsOwnerFirst(t *testing.T) {
	if testing.Short() && mutant.Active() == "" { // cmd/mutants runs -short: the detector is this mutant's only judge
		t.Skip("builds a -race binary")
	}
	out, err := raceRun(t, "orphandrain", "refalloc_yield")
	if err != nil || strings.Contains(out, "DATA RACE") || !strings.Contains(out, "backend ok") {
		t.Fatalf("an orphan adopted and relisted, then drained from the orphans' stack: reported or failed (err %v):\n%s", err, out)
	}
}
