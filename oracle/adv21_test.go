package oracle_test

import (
	"testing"

	"github.com/refalloc/refalloc/oracle"
	"github.com/refalloc/refalloc/spec"
)

// Tests from adv21's one-line slips in the model.

// TestModelReallocToZeroOfFreedObject (FREE-DOUBLE): Realloc(b, 0) of a freed
// b that returns b itself hands out a freed object: a FREE-DOUBLE violation,
// like any other size.
// Slip (reallocfreedzero): the not-live case is looked at only for n > 0, so
// Realloc(b, 0) falls to the in-place case and is called REFINES.
func TestModelReallocToZeroOfFreedObject(t *testing.T) {
	for _, n := range []int{0, 8} {
		m := oracle.New(base, size)
		wantRule(t, "open", m.OpenCache(0), "")
		wantRule(t, "alloc", m.Alloc(0, 8, 1, base, 8, 8, oracle.OK), "")
		wantRule(t, "free", m.Free(0, base, oracle.OK), "")
		wantRule(t, "Realloc of a freed object returns it", m.Realloc(0, base, n, base, n, oracle.UsableSize(n, 1), oracle.OK), spec.RuleFreeDouble)
	}
}

// TestModelReallocRefusedInvalidCounted (FREE-INVALID): a Realloc refused as
// ErrInvalidPointer, of a foreign slice or of a pointer inside a live object,
// counts one invalid free, which Stats.InvalidFrees must show.
// Slip (reallocinvaliduncounted): Realloc counts the bad free but not as
// invalid, so Stats counting it is refused and not counting it passes.
func TestModelReallocRefusedInvalidCounted(t *testing.T) {
	m := oracle.New(base, size)
	wantRule(t, "open", m.OpenCache(0), "")
	wantRule(t, "alloc", m.Alloc(0, 64, 1, base, 64, 64, oracle.OK), "")
	wantRule(t, "Realloc of a foreign slice", m.Realloc(0, base+size+64, 16, 0, 0, 0, oracle.InvalidPointer), "")
	wantRule(t, "Realloc inside a live object", m.Realloc(0, base+8, 16, 0, 0, 0, oracle.InvalidPointer), "")
	if double, invalid := m.BadFreeKinds(); double != 0 || invalid != 2 {
		t.Errorf("after two invalid Reallocs the model saw %d double and %d invalid frees, want 0 and 2", double, invalid)
	}
}
