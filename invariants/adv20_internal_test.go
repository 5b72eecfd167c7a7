package invariants

import (
	"strings"
	"testing"

	"github.com/refalloc/refalloc/impl"
	"github.com/refalloc/refalloc/spec"
)

// TestHarnessReallocChecksLastKeptByte (INTEGRITY): a Realloc keeps every
// byte up to min(len, n), the last one too: a Realloc in place (100 to 104
// bytes, class 112) whose object's byte 99 changes while the call runs (a
// copy one byte short) is reported as that kept byte. The change is made at
// the realloc's saw point, after the harness checked the object intact.
// Mutant keptlastbyte (the kept loop stops one byte short) (adv20).
func TestHarnessReallocChecksLastKeptByte(t *testing.T) {
	h := adv18Machine(t, impl.Options{Reserve: 16 * spec.SuperblockSize}, 1).h
	id := h.Caches()[0]
	if err := h.Alloc(id, 100, 1); err != nil {
		t.Fatal(err)
	}
	a := h.LastAddr
	b := h.Object(a)
	sawHook = func(c sawCall) {
		if c.Call == "realloc" && c.Addr == a {
			b[99] ^= 0xff
		}
	}
	defer func() { sawHook = nil }()
	err := h.Realloc(id, a, 104)
	if h.LastAddr != a && err == nil {
		t.Fatalf("set-up: Realloc(100 -> 104) moved from %#x to %#x", a, h.LastAddr)
	}
	if err == nil || !strings.Contains(err.Error(), spec.RuleIntegrity) || !strings.Contains(err.Error(), "kept byte 99") {
		t.Errorf("a Realloc that lost its last kept byte: %v, want %s naming kept byte 99", err, spec.RuleIntegrity)
	}
}

// TestExpectInPlaceNotOwner (REFINES: a small object stays in place exactly
// when the resizing cache owns it and its class serves n): the snapshot is
// sure both ways, in place for its owner and moving for another cache.
// Mutant inplaceownerunsure (sure only for the owner: a cache that does not
// own the object and resizes it in place passes) (adv20).
func TestExpectInPlaceNotOwner(t *testing.T) {
	h := adv18Machine(t, impl.Options{Reserve: 16 * spec.SuperblockSize}, 2).h
	owner, other := h.Caches()[0], h.Caches()[1]
	if err := h.Alloc(owner, 100, 1); err != nil {
		t.Fatal(err)
	}
	s := h.A.Snapshot()
	if in, sure := expectInPlace(s, owner, h.LastAddr, 104); !in || !sure {
		t.Errorf("expectInPlace by the owner: in place %v, sure %v; want true, true", in, sure)
	}
	if in, sure := expectInPlace(s, other, h.LastAddr, 104); in || !sure {
		t.Errorf("expectInPlace by another cache: in place %v, sure %v; want false, true", in, sure)
	}
}
