package invariants_test

import (
	"testing"

	"github.com/refalloc/refalloc/invariants"
	"github.com/refalloc/refalloc/oracle"
	"github.com/refalloc/refalloc/spec"
)

// Tests from adv22: harness checks only a misbehaving allocator reaches,
// each fed what such an allocator would leave.

// TestRefusalVerdict (FREE-INVALID): a free refused as an invalid pointer
// changes nothing: one whose snapshots before and after differ (here by an
// allocation between them) is reported; the same snapshots around a free that
// succeeded, or the same snapshot twice around a refusal, pass.
// Slip (hrefusaldiff): the harness never compares the snapshots around a
// refusal.
func TestRefusalVerdict(t *testing.T) {
	h, id := setup(t)
	before := h.A.Snapshot()
	must(t, h.Alloc(id, 100, 1))
	after := h.A.Snapshot()
	v := invariants.RefusalVerdict(id, 0x1000, oracle.InvalidPointer, before, after)
	fires(t, spec.RuleFreeInvalid, "changed the state", one(v))
	if v := invariants.RefusalVerdict(id, 0x1000, oracle.InvalidPointer, after, after); v != nil {
		t.Errorf("a refusal that changed nothing: %v", v)
	}
	if v := invariants.RefusalVerdict(id, 0x1000, oracle.OK, before, after); v != nil {
		t.Errorf("a free that succeeded: %v", v)
	}
}

// TestReallocFailedLeavesObjectIntact (INTEGRITY, OOM-REAL): a Realloc that
// fails leaves its live object as it was: a byte of it changed by the failed
// call (here by hand, between the call and the check) is reported, (here
// a refusal, ErrInvalidSize, which an out-of-memory shares the check with);
// the object untouched passes.
// Slip (reallocintactoom): the harness does not read the object after a
// failed Realloc.
func TestReallocFailedLeavesObjectIntact(t *testing.T) {
	h, id := setup(t)
	must(t, h.Alloc(id, 100, 1))
	a := h.Live()[0]
	b := h.Object(a)
	if v := h.ReallocFailed(id, b, -1, oracle.InvalidSize, true); v != nil {
		t.Fatalf("untouched object: %v", v)
	}
	full := b[:cap(b)]
	full[cap(b)-1] ^= 0xff
	fires(t, spec.RuleIntegrity, "was filled with", one(h.ReallocFailed(id, b, -1, oracle.InvalidSize, true)))
	full[cap(b)-1] ^= 0xff
}

// one is v as a list of violations: none if v is nil.
func one(v *invariants.Violation) []*invariants.Violation {
	if v == nil {
		return nil
	}
	return []*invariants.Violation{v}
}
