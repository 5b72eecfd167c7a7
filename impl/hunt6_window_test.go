//go:build refalloc_yield

package impl_test

import (
	"errors"
	"testing"

	"github.com/refalloc/refalloc/impl"
	"github.com/refalloc/refalloc/spec"
)

// TestReleaseStampNamesTheObject (FREE-DOUBLE: a double free found after the
// call that made it returned is reported with the object's address): a
// remote free of an object already freed, landing while its owner is on its
// way to release the now empty superblock (YieldReleaseLock), is a pending
// bit only the release's stamping sees. The report names that object, one in
// the second group here, as the collection's report does
// (TestLateDoubleFreeNamesTheObject). Slip: the stamping loop passes the bit's
// index within its group, not within the superblock.
func TestReleaseStampNamesTheObject(t *testing.T) {
	var reported []error
	a, err := impl.New(impl.Options{Reserve: 8 * spec.SuperblockSize, OnError: func(err error) { reported = append(reported, err) }})
	must(t, err)
	defer a.Close()
	c, _ := a.NewCache()
	d, _ := a.NewCache()
	var objs [][]byte
	for range 40 { // class 256: group 0 and part of group 1
		objs = append(objs, allocN(t, c, 256))
	}
	for _, b := range objs {
		must(t, c.Free(b))
	}
	x := objs[35] // object 35: group 1, bit 3
	err = during(t, newPause(impl.YieldReleaseLock),
		func() error { c.Flush(); return nil }, // every object free: released
		func() { must(t, d.Free(x)) })          // remote, accepted: the owner is c still
	must(t, err)
	var fe *impl.FreeError
	if len(reported) != 1 || !errors.As(reported[0], &fe) || !errors.Is(fe, impl.ErrDoubleFree) {
		t.Fatalf("reported %v, want one double free", reported)
	}
	if fe.Addr != addrOf(x) || fe.Class != spec.SizeToClass(256) {
		t.Errorf("the double free found by the release is reported at %#x class %d, the object is at %#x class %d",
			fe.Addr, fe.Class, addrOf(x), spec.SizeToClass(256))
	}
	if s := a.Stats(); s.DoubleFrees != 1 {
		t.Errorf("%d double frees counted, want 1", s.DoubleFrees)
	}
}
