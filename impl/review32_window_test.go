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
