package invariants_test

import (
	"testing"

	"github.com/refalloc/refalloc/impl"
	"github.com/refalloc/refalloc/invariants"
	"github.com/refalloc/refalloc/spec"
)

// TestSharedInteriorFreeOnClosedCache (FREE-INVALID, REFINES): a closed cache
// answers every free with ErrClosed before it looks at the pointer, so a stale
// free through it of an address inside a live object is refused as closed,
// which is right, and changes nothing: Settle must accept it, and the object
// stays live for its holder to free.
// Bug (found by hunt20): JudgeAddress required ErrInvalidPointer of every free
// inside a live object, ErrClosed included.
func TestSharedInteriorFreeOnClosedCache(t *testing.T) {
	sh, err := invariants.NewShared(impl.Options{Reserve: 16 * spec.SuperblockSize})
	must(t, err)
	c1, id1, err := sh.OpenCache()
	must(t, err)
	c2, id2, err := sh.OpenCache()
	must(t, err)
	o, ok := sh.Alloc(c1, id1, 100, 1, 0x11)
	if !ok {
		t.Fatal("Alloc failed")
	}
	sh.CloseCache(c2, id2)
	sh.StaleFree(c2, id2, o.B[8:])
	sh.Settle()
	if !sh.Alive(o) {
		t.Error("the object is not live after a refused free inside it")
	}
	sh.Free(c1, id1, o)
	sh.CloseCache(c1, id1)
	sh.Check(true)
	sh.Close()
	if vs := sh.Violations(); len(vs) != 0 {
		t.Fatalf("violations: %v", vs)
	}
}
