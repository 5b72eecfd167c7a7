package impl_test

import (
	"errors"
	"testing"

	"github.com/refalloc/refalloc/impl"
	"github.com/refalloc/refalloc/spec"
)

// TestReallocPanicFreesNewObject (CONSERVE, FREE-DOUBLE): an OnError that
// panics inside a moving Realloc's free of b (the free empties b's superblock,
// whose release finds a remote double free) must not leave the large new object
// allocated and reserved: the caller never got it, so nothing could free it,
// and its reservation would refuse every later free of its address.
func TestReallocPanicFreesNewObject(t *testing.T) {
	a, c, objs := pendingDoubleFreePanics(t, 16*spec.SuperblockSize)
	for _, b := range objs[1:15] {
		must(t, c.Free(b))
	}
	func() {
		defer func() {
			if r := recover(); r == nil || !errors.Is(r.(error), impl.ErrDoubleFree) {
				t.Fatalf("Realloc whose free of b empties its superblock: recovered %v", r)
			}
		}()
		c.Realloc(objs[15], 2*spec.SuperblockSize) // its free of b releases the superblock
	}()
	c.Flush()
	if st := a.Stats(); st.Large.LiveObjects != 0 {
		t.Fatalf("after the panic: %d large objects live, want 0 (the new object leaked)", st.Large.LiveObjects)
	}
	must(t, c.Free(objs[16]))
}
