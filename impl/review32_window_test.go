//go:build refalloc_yield

package impl_test

import (
	"errors"
	"testing"

	"github.com/refalloc/refalloc/impl"
	"github.com/refalloc/refalloc/spec"
)

// TestRemoteFreeRetriesLostCAS (CONSERVE, FREE-DOUBLE): a remote free reads its
// object's remote word and, before its CAS, another cache's remote free into
// the same group lands: the CAS fails and the free must load the word again
// and retry, not take the free as done. Slip (remotecaslost): the bit is never
// set, the object stays live for good, and its owner's free of it is accepted.
func TestRemoteFreeRetriesLostCAS(t *testing.T) {
	const size = 4096
	a, err := impl.New(impl.Options{Reserve: 16 * spec.SuperblockSize})
	must(t, err)
	defer a.Close()
	c, _ := a.NewCache()
	d, _ := a.NewCache()
	e, _ := a.NewCache()
	objs := allocObjects(t, c, size, spec.ClassObjects(spec.SizeToClass(size))) // S, c's; one group
	must(t, during(t, newPause(impl.YieldRemoteTag), func() error {
		return d.Free(objs[3]) // remote: S is c's
	}, func() {
		must(t, e.Free(objs[5])) // remote, into the same word
	}))
	for _, i := range []int{3, 5} {
		if err := c.Free(objs[i]); !errors.Is(err, impl.ErrDoubleFree) {
			t.Fatalf("the owner's free of object %d, remote-freed already: %v, want ErrDoubleFree", i, err)
		}
	}
	c.Flush()
	if st := sbState(t, a, sbOf(a, objs[0])); st.Live != len(objs)-2 {
		t.Fatalf("%d objects live after two remote frees of %d, want %d", st.Live, len(objs), len(objs)-2)
	}
}

// TestAcquireGivesRemoteSetBeforeLayout (CACHE-COHERENT 2, FREE-DOUBLE): a
// superblock released from class 4096 (a one-word remote set) is carved for
// class 8, which needs a new set. A stale free of its old object 0 by another
// cache reads the header while the carving is half done (acquire.carve): it
// must see either the pooled superblock (a double free, refused) or the new
// layout with its new set (a double free of object 0, not handed out yet,
// found when the group is taken). Slip (remotesetlate): the layout is
// published before the set is replaced; the free pairs the new layout with the
// old set, its CAS lands there, it returns nil, and the double free is never
// found.
func TestAcquireGivesRemoteSetBeforeLayout(t *testing.T) {
	a, err := impl.New(impl.Options{Reserve: 4 * spec.SuperblockSize})
	must(t, err)
	defer a.Close()
	c, _ := a.NewCache()
	d, _ := a.NewCache()
	x := allocN(t, c, 4096)
	must(t, c.Free(x))
	c.Flush() // released: pooled, its one-word remote set stamped
	var y []byte
	var stale error
	must(t, during(t, newPause(impl.YieldAcquireCarve), func() (err error) {
		y, err = c.Alloc(8) // carves the superblock for class 8
		return err
	}, func() {
		stale = d.Free(x) // d has no entry: a miss, judged by the header
	}))
	if addrOf(y) != addrOf(x) {
		t.Fatalf("the superblock was not reused at the same address (%#x, %#x)", addrOf(x), addrOf(y))
	}
	must(t, c.Free(y))
	c.Flush()
	d.Flush()
	switch st := a.Stats(); {
	case stale == nil && st.DoubleFrees != 1:
		t.Fatalf("a free of an object not handed out returned nil, and %d double frees were found, want 1 (FREE-DOUBLE)", st.DoubleFrees)
	case stale != nil && !errors.Is(stale, impl.ErrDoubleFree):
		t.Fatalf("the stale free: %v, want ErrDoubleFree or nil", stale)
	}
	must(t, c.Close())
	must(t, d.Close())
}
