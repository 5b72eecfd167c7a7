package invariants_test

import (
	"testing"
	"unsafe"

	"github.com/refalloc/refalloc/impl"
	"github.com/refalloc/refalloc/invariants"
	"github.com/refalloc/refalloc/spec"
)

// TestCheckReallocOOM (OOM-REAL): an out-of-memory answer to a Realloc of a
// live large object is refused while the superblocks right after it are free
// and enough to grow in place (impl mutant reallocoomnoregrow: the move's
// failed allocation freed them, and the Realloc did not look again), and
// accepted when they are too few, or for a shrink to a small size.
func TestCheckReallocOOM(t *testing.T) {
	const sb = spec.SuperblockSize
	a, err := impl.New(impl.Options{Reserve: 16 * sb})
	must(t, err)
	defer a.Close()
	c, err := a.NewCache()
	must(t, err)
	big, err := c.Alloc(8 * sb) // superblocks 0-7; 8-15 free
	must(t, err)
	old := uintptr(unsafe.Pointer(unsafe.SliceData(big)))
	s := a.Snapshot()
	var vs []*invariants.Violation
	if v := invariants.CheckReallocOOM(s, old, cap(big), 12*sb); v != nil {
		vs = append(vs, v)
	}
	fires(t, spec.RuleOOMReal, "8 free superblocks right after it, 4 needed", vs)
	for _, n := range []int{16*sb + 1, 100} {
		if v := invariants.CheckReallocOOM(s, old, cap(big), n); v != nil {
			t.Errorf("Realloc to %d: %v", n, v)
		}
	}
	must(t, c.Free(big))
}
