package impl_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/refalloc/refalloc/impl"
	"github.com/refalloc/refalloc/spec"
)

// Tests from hunt26, a blind injected-bug hunt of large.go, realloc.go,
// guard.go, debug.go and the fronts: each kills a slip the suite missed.

//go:noinline
func reallocHere(c *impl.Cache, b []byte, n int) ([]byte, error) { return c.Realloc(b, n) }

// TestGuardReallocDropNamesFreeSite (GUARD-FAULT): a moving Realloc of a
// freed large object in guard mode finds b dead only once it has its new
// object, reserved, which it then frees itself (freeReserved) into the
// quarantine: an access there is explained with the stack that freed it,
// the Realloc's, as for any freed guarded object.
func TestGuardReallocDropNamesFreeSite(t *testing.T) {
	a := newGuarded(t, impl.GuardOptions{SampleRate: -1})
	c, err := a.NewCache()
	must(t, err)
	b, err := c.Alloc(2 * spec.SuperblockSize)
	must(t, err)
	must(t, c.Free(b))
	if _, err := reallocHere(c, b, 3*spec.SuperblockSize); !errors.Is(err, impl.ErrDoubleFree) {
		t.Fatalf("Realloc of a freed large object: %v, want ErrDoubleFree", err)
	}
	var dropped uintptr
	for _, q := range a.Snapshot().Guard.Quarantine {
		if q.Superblocks == 3 {
			dropped = q.Addr
		}
	}
	if dropped == 0 {
		t.Fatalf("the Realloc's dropped 3-superblock object is not in the quarantine: %+v", a.Snapshot().Guard.Quarantine)
	}
	e, ok := a.ExplainAddr(dropped + 5)
	if !ok || !strings.Contains(e.FreeSite, "impl_test.reallocHere") {
		t.Fatalf("ExplainAddr of the dropped object: %v, FreeSite\n%s\nwant the Realloc's stack (reallocHere)", ok, e.FreeSite)
	}
}
