//go:build refalloc_yield

package invariants

import (
	"math/rand/v2"
	"strings"
	"testing"
	"unsafe"

	"github.com/refalloc/refalloc/spec"
)

// TestExploreRemembersEight (FREE-DOUBLE): the explorer's stale frees reach
// back over the last 8 objects a worker freed (a double free of an address
// reused several times since), no fewer, no more: after 10 frees a worker
// remembers the last 8, oldest first.
// Slip (exploreremoteremember): a worker remembers only its last free.
func TestExploreRemembersEight(t *testing.T) {
	w := &eworker{}
	objs := make([][]byte, 10)
	for i := range objs {
		objs[i] = make([]byte, 1)
		w.remember(objs[i])
	}
	if len(w.freed) != 8 {
		t.Fatalf("a worker remembers %d frees, want 8", len(w.freed))
	}
	for i, b := range w.freed {
		if unsafe.SliceData(b) != unsafe.SliceData(objs[2+i]) {
			t.Errorf("remembered free %d is not the worker's free %d", i, 2+i)
		}
	}
}

// TestExploreTracesFailingRound: a violation found at a round's check (here
// a live object's byte changed at the round's quiescent point: INTEGRITY)
// stops the exploration with that round's plans and schedule in Trace, so
// that a failure says which interleaving found it; later rounds do not run.
// Slip (exploreviolationslast): the violations are taken only at the end of
// the run, with no trace.
func TestExploreTracesFailingRound(t *testing.T) {
	ch := seededChooser{rand.New(rand.NewPCG(1, 2))}
	cfg := DrawExploreConfig(ch)
	rounds := 0
	cfg.atCheck = func(sh *Shared) {
		if rounds++; rounds < 3 {
			return
		}
		sh.mu.Lock()
		defer sh.mu.Unlock()
		for _, o := range sh.live {
			if !o.Mixed && cap(o.B) > 0 {
				o.B[:cap(o.B)][0] ^= 0xff
				return
			}
		}
		t.Fatal("no live object at round 3")
	}
	res, err := Explore(ch, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Violations) == 0 || res.Violations[0].Rule != spec.RuleIntegrity {
		t.Fatalf("violations %v, want INTEGRITY first", res.Violations)
	}
	if res.Rounds != 3 || !strings.Contains(res.Trace, "worker 0:") || !strings.Contains(res.Trace, "schedule:\n") {
		t.Fatalf("%d rounds, trace %q; want 3 rounds and the third's plans and schedule", res.Rounds, res.Trace)
	}
}

type seededChooser struct{ r *rand.Rand }

func (c seededChooser) Intn(n int, _ string) int { return c.r.IntN(n) }
