//go:build refalloc_yield

package impl_test

import (
	"testing"

	"github.com/refalloc/refalloc/impl"
	"github.com/refalloc/refalloc/spec"
)

// TestStaleFreeAfterPinnedTake (FREE-DOUBLE): allocSlow's first step takes
// the current superblock's next group when nothing is pending on it
// (takeGroupPinned); a stale pointer's remote free of the group's lowest
// object, held now, that lands after that look must still stop the object
// from being handed out with the free pending: the slow path collects it as
// a double free (counted, dropped) before it hands the object out, live.
// Slip: the pending bit is not looked at again after the take
// (alloctakenunchecked): the object goes out with a remote free pending on
// it, and the next collection frees it while it is live.
func TestStaleFreeAfterPinnedTake(t *testing.T) {
	a, err := impl.New(impl.Options{Reserve: 16 * spec.SuperblockSize})
	must(t, err)
	defer a.Close()
	c, _ := a.NewCache()
	d, _ := a.NewCache()
	objs := allocObjects(t, c, 64, 32) // group 0 of a fresh superblock, all of it
	must(t, c.Free(objs[0]))
	must(t, c.Free(objs[1]))
	var got []byte
	err = during(t, newPause(impl.YieldAllocTaken),
		func() (err error) {
			got, err = c.Alloc(64) // takes group 0 back: objects 0 and 1 held
			return err
		},
		func() {
			must(t, d.Free(objs[0])) // a stale pointer: the object is held, the free pending
		})
	must(t, err)
	c.Flush()
	if s := a.Stats(); s.DoubleFrees != 1 {
		t.Fatalf("DoubleFrees %d, want 1: the stale free of a held object", s.DoubleFrees)
	}
	if err := c.Free(got); err != nil {
		t.Fatalf("the object Alloc returned is not live after a flush: %v", err)
	}
	for _, b := range objs[2:] {
		must(t, c.Free(b))
	}
}
