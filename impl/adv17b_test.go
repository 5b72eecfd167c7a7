package impl_test

// Tests of adv17b (semantic slips).

import (
	"fmt"
	"testing"

	"github.com/refalloc/refalloc/impl"
	"github.com/refalloc/refalloc/impl/expvarstats"
	"github.com/refalloc/refalloc/spec"
)

// TestExpvarCommittedIsCommitted (MEM-ACCOUNT), beside adv9's expvar test
// (expvarstats' own TestFromStatsFields sees the same slip, and cmd/mutants
// now runs that package too): committed_bytes is Stats.Committed,
// the memory that may be resident, not in_use_bytes. A large object of four
// superblocks, freed, leaves the pool four committed empty superblocks, kept
// for good within Retain (no decay can take them between the two reads):
// committed_bytes is then four superblocks and in_use_bytes none. Slip
// (adv17b 26, expvarcommittedinuse): committed_bytes is published from
// Stats.InUse, and reads 0.
func TestExpvarCommittedIsCommitted(t *testing.T) {
	a, err := impl.New(impl.Options{Reserve: 16 * spec.SuperblockSize, Retain: 16 * spec.SuperblockSize})
	must(t, err)
	defer a.Close()
	big, err := a.Alloc(4 * spec.SuperblockSize)
	must(t, err)
	big[0], big[len(big)-1] = 1, 1 // touched: committed in fact too
	must(t, a.Free(big))
	st := a.Stats()
	if st.Committed != 4*spec.SuperblockSize || st.InUse != 0 {
		t.Fatalf("after freeing a large object of 4 superblocks: Stats.Committed %d, InUse %d; want %d and 0",
			st.Committed, st.InUse, 4*spec.SuperblockSize)
	}
	name := fmt.Sprintf("refalloc_adv17b_committed_%d", expvarNames.Add(1)) // -count=N publishes anew
	expvarstats.Publish(name, a)
	m := readVar(t, name)
	if m["committed_bytes"] != float64(st.Committed) || m["in_use_bytes"] != 0.0 {
		t.Errorf("published committed_bytes %v, in_use_bytes %v; want %d (Stats.Committed) and 0",
			m["committed_bytes"], m["in_use_bytes"], st.Committed)
	}
}
