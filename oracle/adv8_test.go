package oracle_test

import (
	"testing"

	"github.com/refalloc/refalloc/oracle"
	"github.com/refalloc/refalloc/spec"
)

// Tests from adv8, an outside round of one-line slips in the model: each feeds
// the model one wrong outcome that only the slipped check can refuse (impl,
// being right, never shows it to the model), and wants the rule.

// TestModelRefusesWrongLength (ZEROED: Alloc(n) returns len == n): a slice of
// the right capacity and address but one byte short, or one long, is refused,
// for Alloc, AllocAligned and a moving Realloc alike (one check, NewObject).
// Slip: NewObject compares the capacity only.
func TestModelRefusesWrongLength(t *testing.T) {
	const base = uintptr(1 << 30)
	for _, n := range []int{1, 100, spec.MaxSmall, spec.MaxSmall + 1} {
		for _, length := range []int{n - 1, n + 1} {
			m := oracle.New(base, 16*spec.SuperblockSize)
			wantRule(t, "Alloc with a wrong len", m.Alloc(-1, n, 1, base, length, oracle.UsableSize(n, 1), oracle.OK), spec.RuleRefines)
			m = oracle.New(base, 16*spec.SuperblockSize)
			wantRule(t, "AllocAligned with a wrong len", m.Alloc(-1, n, 16, base, length, oracle.UsableSize(n, 16), oracle.OK), spec.RuleRefines)
			m = oracle.New(base, 16*spec.SuperblockSize)
			must(t, m.Alloc(-1, 8, 1, base+4*spec.SuperblockSize, 8, 8, oracle.OK))
			wantRule(t, "a moving Realloc with a wrong len", m.Realloc(-1, base+4*spec.SuperblockSize, n, base, length, oracle.UsableSize(n, 1), oracle.OK), spec.RuleRefines)
		}
		m := oracle.New(base, 16*spec.SuperblockSize)
		wantRule(t, "Alloc with the right len", m.Alloc(-1, n, 1, base, n, oracle.UsableSize(n, 1), oracle.OK), "")
	}
}

// TestModelRefusesObjectBelowReservation (NO-OVERLAP: live objects lie inside
// the reservation): an object that starts before the reservation's base is
// refused, however well aligned, small or large; one at the base is not.
// Slip: NewObject checks only the object's end against the reservation.
func TestModelRefusesObjectBelowReservation(t *testing.T) {
	const base = uintptr(1 << 30)
	for _, n := range []int{8, 100, spec.MaxSmall + 1} {
		for _, below := range []uintptr{spec.SuperblockSize, 1 << 20} {
			m := oracle.New(base, 16*spec.SuperblockSize)
			wantRule(t, "Alloc below the base", m.Alloc(-1, n, 1, base-below, n, oracle.UsableSize(n, 1), oracle.OK), spec.RuleNoOverlap)
		}
		m := oracle.New(base, 16*spec.SuperblockSize)
		wantRule(t, "Alloc at the base", m.Alloc(-1, n, 1, base, n, oracle.UsableSize(n, 1), oracle.OK), "")
	}
}

// TestModelStatsEveryClass (STATS-LEAD, STATS-LAG, STATS-EXACT): CheckStats
// judges every class, the last one included: a class's frees published ahead
// of the truth, its allocations behind it, or after a flush one more than
// made, are each refused, naming the class.
// Slip: CheckStats's loop stops one class short.
func TestModelStatsEveryClass(t *testing.T) {
	m := oracle.New(1<<30, 16*spec.SuperblockSize)
	for k := range spec.NumClasses {
		var ahead, extra oracle.StatsView
		ahead.Frees[k] = 1
		extra.Allocs[k] = 1
		for _, c := range []struct {
			name    string
			s       oracle.StatsView
			flushed bool
			rule    string
		}{
			{"frees ahead", ahead, false, spec.RuleStatsLag},
			{"allocs after a flush", extra, true, spec.RuleStatsExact},
		} {
			vs := m.CheckStats(c.s, 1, c.flushed)
			if len(vs) != 1 || vs[0].Rule != c.rule {
				t.Errorf("class %d, %s: %v, want one %s", k, c.name, vs, c.rule)
			}
		}
	}
	// Allocs behind the truth, in the last class.
	k := spec.NumClasses - 1
	n := spec.ClassSize(k)
	must(t, m.Alloc(-1, n, 1, 1<<30, n, n, oracle.OK))
	if vs := m.CheckStats(oracle.StatsView{}, 1, false); len(vs) != 1 || vs[0].Rule != spec.RuleStatsLead {
		t.Errorf("class %d, allocs behind: %v, want one %s", k, vs, spec.RuleStatsLead)
	}
}

func must(t *testing.T, v *oracle.Violation) {
	t.Helper()
	if v != nil {
		t.Fatal(v)
	}
}

// TestModelNilFreeOnClosed (FREE-INVALID: a nil or zero-capacity slice is a
// no-op; impl.Cache.Free and Allocator.Free return nil for it before they look
// at anything): on a closed cache, and on every caller after Allocator.Close,
// a nil free is still a no-op, not ErrClosed; any other free there is
// ErrClosed.
// Slip (it was the model's): judgeFree answered ErrClosed before it looked
// at the pointer, so the model refused the allocator's documented nil, and no
// driver freed nil through a closed cache to see it.
func TestModelNilFreeOnClosed(t *testing.T) {
	const base = uintptr(1 << 30)
	m := oracle.New(base, 16*spec.SuperblockSize)
	must(t, m.OpenCache(1))
	must(t, m.Alloc(1, 100, 1, base, 100, oracle.UsableSize(100, 1), oracle.OK))
	must(t, m.CloseCache(1, oracle.OK))
	wantRule(t, "nil free on a closed cache", m.Free(1, 0, oracle.OK), "")
	wantRule(t, "nil free on a closed cache refused", m.Free(1, 0, oracle.Closed), spec.RuleRefines)
	wantRule(t, "free of a live object on a closed cache", m.Free(1, base, oracle.Closed), "")
	must(t, m.Close(oracle.OK, 1))
	for _, id := range []int{-1, 1} {
		wantRule(t, "nil free after Close", m.Free(id, 0, oracle.OK), "")
		wantRule(t, "nil free after Close refused", m.Free(id, 0, oracle.Closed), spec.RuleRefines)
		wantRule(t, "free after Close", m.Free(id, base, oracle.Closed), "")
	}
}

// TestModelRefusesAllocAtLiveAddress (NO-OVERLAP: an address is never handed
// out while it is live): an Alloc, small or large, returning the address of a
// live object, small or large, is refused, by the model itself (invariants'
// range check is another check, on the snapshot).
// Slip: Model.Alloc skips its live-address check for large objects.
func TestModelRefusesAllocAtLiveAddress(t *testing.T) {
	const base = uintptr(1 << 30)
	for _, first := range []int{100, spec.MaxSmall + 1} {
		for _, second := range []int{100, spec.MaxSmall + 1} {
			m := oracle.New(base, 16*spec.SuperblockSize)
			must(t, m.Alloc(-1, first, 1, base, first, oracle.UsableSize(first, 1), oracle.OK))
			wantRule(t, "Alloc at a live address", m.Alloc(-1, second, 1, base, second, oracle.UsableSize(second, 1), oracle.OK), spec.RuleNoOverlap)
		}
	}
}
