package impl_test

// Tests of hunt13, a review of the fast paths' recent performance changes
// (the held-group select, the overlapping-store zero, object, the entry's
// pointers, the front's pinned publish). Each names its rule and the slip it
// kills.

import (
	"errors"
	"runtime"
	"testing"

	"github.com/refalloc/refalloc/impl"
	"github.com/refalloc/refalloc/spec"
)

// TestFrontAllocReadsNothingAfterUnpin (FRONT-EXCLUSIVE): the pinned
// Allocator.Alloc makes its slice before it gives the P's cache up. Once it
// unpins (and, under -race, gives back the token) another goroutine on the
// P may use the cache, and a refill there writes the class's held-group
// fields (take sets cc.size): a read of them after unpin is a data race,
// which the race detector reports deterministically whatever the
// interleaving, since the only edge between the two goroutines is the token
// (pinSync). Slip: object(o, n, cc.size) after unpin.
func TestFrontAllocReadsNothingAfterUnpin(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1)) // one P: both goroutines on its cache
	a, err := impl.New(impl.Options{Reserve: 16 * spec.SuperblockSize})
	must(t, err)
	defer a.Close()
	// The P's cache takes a group of 32 objects of class 16; all but one
	// are handed out here, so that the other goroutine's first Alloc
	// refills (the race detector keeps a few accesses a word: the write
	// must come before other accesses push the read out).
	ours := allocObjects(t, a, 16, 31)
	start, done := make(chan struct{}), make(chan struct{})
	var theirs [][]byte
	go func() {
		defer close(done)
		<-start
		for range 200 { // refills: take writes the held group's fields
			b, err := a.Alloc(16)
			if err != nil {
				t.Error(err)
				return
			}
			theirs = append(theirs, b)
		}
	}()
	close(start)
	b, err := a.Alloc(16) // the pinned fast path, the group's last object
	must(t, err)
	<-done
	if len(b) != 16 || cap(b) != 16 {
		t.Fatalf("Alloc(16) gave len %d cap %d", len(b), cap(b))
	}
	for _, x := range append(append(theirs, ours...), b) {
		must(t, a.Free(x))
	}
}

// TestFrontFreePublishesBeforeUnpin (FRONT-EXCLUSIVE): the pinned
// Allocator.Free that reaches the limit publishes (folds localFreed, files
// the superblock) before it gives the P's cache up: after unpin the next
// goroutine on the P frees into the same superblock, and a publication then
// would race with it (under -race the detector reports it, the token being
// the only edge between them). Slip: unpin, then publish.
func TestFrontFreePublishesBeforeUnpin(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	a, err := impl.New(impl.Options{Reserve: 16 * spec.SuperblockSize})
	must(t, err)
	defer a.Close()
	objs := allocObjects(t, a, 16, 100)
	for _, b := range objs[:63] { // pinned local frees, below the limit (64)
		must(t, a.Free(b))
	}
	start, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		<-start
		for _, b := range objs[64:] { // reads the superblock's localFreed
			if err := a.Free(b); err != nil {
				t.Error(err)
				return
			}
		}
	}()
	close(start)
	must(t, a.Free(objs[63])) // the 64th: publishes, pinned
	<-done
}

// TestOwnerFreeSeesPendingRemoteFree (FREE-DOUBLE): the owner's free looks at
// the pending remote bits: an object another cache has freed (pending, not
// yet collected) is not live, and the owner's free of it is a double free,
// refused at once. And after Allocator.Close, which marks every remote word
// pending, the owner's free of a live object leaves the fast path for
// ErrClosed. Slip: notLive without the remote word (localpendingignored).
func TestOwnerFreeSeesPendingRemoteFree(t *testing.T) {
	a, err := impl.New(impl.Options{Reserve: 16 * spec.SuperblockSize})
	must(t, err)
	c, _ := a.NewCache()
	d, _ := a.NewCache()
	x, y, z := allocN(t, c, 64), allocN(t, c, 64), allocN(t, c, 64)
	must(t, c.Free(y)) // c's entry for the superblock: mine
	must(t, d.Free(x)) // remote: pending in the superblock's word
	if err := c.Free(x); !errors.Is(err, impl.ErrDoubleFree) {
		t.Fatalf("owner's free of an object freed remotely: %v, want ErrDoubleFree", err)
	}
	c.Flush()
	if s := a.Stats(); s.DoubleFrees != 1 {
		t.Fatalf("DoubleFrees %d, want 1 (the owner's refused free)", s.DoubleFrees)
	}
	if err := a.Close(); !errors.Is(err, impl.ErrLeaked) { // z is live
		t.Fatalf("Close: %v, want ErrLeaked", err)
	}
	if err := c.Free(z); !errors.Is(err, impl.ErrClosed) {
		t.Fatalf("owner's free after Allocator.Close: %v, want ErrClosed", err)
	}
}

// TestReallocOfHeldObjectRefused (FREE-DOUBLE, NO-OVERLAP): Realloc's
// in-place check is a free's liveness check without the free: a stale slice
// of an object that a refill took back into the held group is not live, so
// Realloc refuses it (ErrDoubleFree) instead of resizing it in place, and the
// object is handed out once. Slip: the check's entry has no class, so it
// looks at class 0's held group (reallocheldclass).
func TestReallocOfHeldObjectRefused(t *testing.T) {
	a, err := impl.New(impl.Options{Reserve: 16 * spec.SuperblockSize})
	must(t, err)
	defer a.Close()
	c, _ := a.NewCache()
	objs := allocObjects(t, c, 64, 32) // group 0 of a fresh superblock, all of it
	must(t, c.Free(objs[0]))
	must(t, c.Free(objs[1]))
	x := allocN(t, c, 64) // the refill takes group 0 back: objs[0] out, objs[1] held
	if addrOf(x) != addrOf(objs[0]) {
		t.Fatalf("setup: got %#x, want object 0 at %#x", addrOf(x), addrOf(objs[0]))
	}
	if r, err := c.Realloc(objs[1], 60); !errors.Is(err, impl.ErrDoubleFree) {
		t.Fatalf("Realloc of a held object's stale slice: %#x, %v; want ErrDoubleFree", addrOf(r), err)
	}
	y := allocN(t, c, 64)
	if addrOf(y) != addrOf(objs[1]) {
		t.Fatalf("the held object went elsewhere: %#x, want %#x", addrOf(y), addrOf(objs[1]))
	}
	for _, b := range append(objs[2:], x, y) {
		must(t, c.Free(b))
	}
}

// TestFrontPinnedPublishFolds (STATS-LAG): the front's pinned free that
// reaches the limit (64 local frees into the current superblock) publishes
// them: the class's Frees count them, and the superblock has no local free
// left unpublished. Slip: it relists without folding (pinnedpublishnofold).
func TestFrontPinnedPublishFolds(t *testing.T) {
	needClassCounters(t)
	if portable {
		t.Skip("no per-P caches: a call's shard depends on its stack") // a stack moved by growth or GC splits the frees over two shards
	}
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1)) // one P: every call on its cache, pinned
	a, err := impl.New(impl.Options{Reserve: 16 * spec.SuperblockSize})
	must(t, err)
	defer a.Close()
	objs := allocObjects(t, a, 16, 100)
	k := spec.SizeToClass(16)
	for _, b := range objs[:64] {
		must(t, a.Free(b))
	}
	if got := a.Stats().Classes[k].Frees; got != 64 {
		t.Fatalf("after 64 frees through the front: Frees %d, want 64 published", got)
	}
	if s := sbState(t, a, sbOf(a, objs[0])); s.LocalFreed != 0 {
		t.Fatalf("superblock %d keeps %d local frees unpublished after the limit", s.Index, s.LocalFreed)
	}
	for _, b := range objs[64:] {
		must(t, a.Free(b))
	}
}
