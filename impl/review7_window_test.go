//go:build refalloc_yield

package impl_test

import (
	"errors"
	"testing"
	"time"

	"github.com/refalloc/refalloc/impl"
	"github.com/refalloc/refalloc/spec"
)

// TestPanickingReleaseStampsEveryWord (CACHE-COHERENT, LIFECYCLE,
// FREE-DOUBLE): an OnError that panics when a release's stamping finds a
// remote double free must not leave the release half done. releaseLocked
// reported each double free from inside its stamping loop, so the panic left
// the superblock small, owned by a cache that no longer lists it, and its
// later remote words unstamped: a stale remote free into one of them still
// succeeded, and once the owner had closed (its superblocks orphaned, but not
// this one, so the owner stayed) its notify found the owner's stack sealed and
// re-read the same owner for good: the free hung (pinned, on the front, it
// would stop the world from ever stopping).
//
// Schedule (1024-byte class: 64 objects, two remote words): x allocates all
// 64 objects of superblock S; d's remote free of o5 pauses after its CAS
// (remote.notify) while x closes (x's Flush collects o5, S becomes an
// orphan), then announces S on the orphans' stack. c frees o6 and adopts S,
// which stays marked notified on the orphans' stack; d frees o5 again (a
// remote double free: S is marked, so nothing is pushed on c's stack); c frees
// the rest, and the free that empties S releases it: the stamping finds o5 in
// word 0 and OnError panics. c closes (its drain of the orphans' stack only
// forwards S: it has an owner). d frees o40 again (word 1).
func TestPanickingReleaseStampsEveryWord(t *testing.T) {
	a, err := impl.New(impl.Options{Reserve: 8 * spec.SuperblockSize, OnError: func(err error) { panic(err) }})
	must(t, err)
	x, _ := a.NewCache()
	c, _ := a.NewCache()
	d, _ := a.NewCache()
	k := spec.SizeToClass(1024)
	n := spec.ClassObjects(k)
	var objs [][]byte
	for range n {
		b, err := x.Alloc(1024)
		must(t, err)
		objs = append(objs, b)
	}
	if addrOf(objs[0])>>spec.SuperblockShift != addrOf(objs[n-1])>>spec.SuperblockShift || n <= 40 {
		t.Fatal("the objects do not fill one superblock of two remote words")
	}
	p := newPause(impl.YieldRemoteNotify)
	must(t, during(t, p, func() error { return d.Free(objs[5]) }, func() { must(t, x.Close()) }))
	must(t, c.Free(objs[6])) // adopts S
	must(t, d.Free(objs[5])) // a remote double free, found when S is released
	func() {
		defer func() {
			if r := recover(); r == nil || !errors.Is(r.(error), impl.ErrDoubleFree) {
				t.Fatalf("the free that empties S: recovered %v", r)
			}
		}()
		for i, b := range objs {
			if i != 5 && i != 6 {
				must(t, c.Free(b))
			}
		}
		t.Fatal("no report of o5's double free")
	}()
	for _, st := range a.Snapshot().Superblocks {
		if st.State == impl.SBSmall && st.List == "none" {
			t.Errorf("after the report: superblock %d small, owned by cache %d and on none of its lists", st.Index, st.Owner)
		}
	}
	must(t, c.Close())
	done := make(chan error, 1)
	go func() { done <- d.Free(objs[40]) }()
	select {
	case err := <-done:
		if !errors.Is(err, impl.ErrDoubleFree) {
			t.Errorf("d's second free of o40: %v, want a double free", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("d's second free of o40 hangs: its notify re-reads the closed owner of a superblock it never orphaned")
	}
}
