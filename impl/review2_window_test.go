//go:build refalloc_yield && !refalloc_portable

package impl_test

import (
	"errors"
	"testing"

	"github.com/refalloc/refalloc/impl"
	"github.com/refalloc/refalloc/spec"
)

// TestFillPinnedRemoteSetReplaced (CACHE-COHERENT 2): as
// TestFreeMissRemoteSetReplaced, but the stale free is the front's, which
// fills its entry pinned (impl.Cache.fillPinned): it reads a pooled
// superblock's remote set (one word: class 4096); before it reads the header,
// the owner carves the superblock for class 8, which needs a new set, and
// hands out the object at the same address. The fill must not pair the old
// set with the new header: the free's CAS would land in the dead set, return
// nil and free nothing.
func TestFillPinnedRemoteSetReplaced(t *testing.T) {
	a, err := impl.New(impl.Options{Reserve: 4 * spec.SuperblockSize})
	must(t, err)
	defer a.Close()
	c, _ := a.NewCache()
	x := allocN(t, c, 4096)
	must(t, c.Free(x))
	c.Flush() // released: pooled, its one-word remote set stamped
	var y []byte
	err = during(t, newPause(impl.YieldFreeRemoteSet),
		func() error { return a.Free(x) }, // the front's cache has no entry: a miss, filled pinned
		func() { y = allocN(t, c, 8) })
	if addrOf(y) != addrOf(x) {
		t.Fatalf("the superblock was not reused at the same address (%#x, %#x)", addrOf(x), addrOf(y))
	}
	if err != nil {
		must(t, c.Free(y)) // judged before the reuse (pooled: a double free): y stays live
		return
	}
	// Judged after the reuse: the front freed y, so the owner must refuse a second free.
	if err := c.Free(y); !errors.Is(err, impl.ErrDoubleFree) {
		t.Fatalf("the stale free returned nil, yet y is still live: the owner's Free(y) = %v", err)
	}
}
