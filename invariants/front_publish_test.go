package invariants_test

import (
	"runtime"
	"testing"

	"github.com/refalloc/refalloc/impl"
	"github.com/refalloc/refalloc/invariants"
	"github.com/refalloc/refalloc/spec"
)

// TestFrontFreePublishesAtLimit (LIFECYCLE, STATS-LAG): the front's pinned
// free does a local free only while it stays below the superblock's publish
// limit; the free that reaches it (for an owned superblock that is not
// current, the one that empties it) takes the slow path, which publishes and
// releases the superblock. On one P every call runs on that P's cache, so
// the sequence is exact: two superblocks' worth and one of 4096-byte objects
// through the Allocator, then every object of the first freed, then a
// quiescent Check.
func TestFrontFreePublishesAtLimit(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	sh, err := invariants.NewShared(impl.Options{Reserve: 64 * spec.SuperblockSize})
	must(t, err)
	n := 4096
	k := spec.SizeToClass(n)
	var objs []invariants.SharedObj
	for range 2*spec.ClassObjects(k) + 1 {
		o, ok := sh.Alloc(nil, invariants.Front, n, 1, 0x11)
		if !ok {
			t.Fatal("Alloc failed")
		}
		objs = append(objs, o)
	}
	// The first superblock, full, went to the orphans when the next became
	// current; the first free adopts it (the slow path) and the others are
	// pinned local frees, up to the one that empties it, which must reach
	// the limit and release it.
	per := spec.ClassObjects(k)
	for _, o := range objs[:per] {
		sh.Free(nil, invariants.Front, o)
	}
	sh.Check(false)
	for _, o := range objs[per:] {
		sh.Free(nil, invariants.Front, o)
	}
	sh.A.Flush()
	sh.Check(true)
	sh.Close()
	report(t, sh)
}
