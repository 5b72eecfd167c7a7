package impl_test

// Tests of hunt15, a mutant hunt of the goroutine-safe front, the superblock
// cache and remote frees. Each names its rule and the slip it kills.

import (
	"errors"
	"runtime"
	"testing"
	"unsafe"

	"github.com/refalloc/refalloc/impl"
	"github.com/refalloc/refalloc/spec"
)

// TestRemoteFreesAnnounceOnce (LIFECYCLE, CONSERVE: a superblock marked
// notified is on exactly one notification stack, once): two remote frees
// into one superblock announce it once; the second finds it notified and
// pushes nothing, and the owner's refill collects both. Slip: notify's test
// of notified has && for || (notifynotmarked): the first free pushes without
// marking, the second pushes the superblock again, onto itself, and the drain
// goes round it for good (in mutant builds drainNotify panics on a stack
// longer than the reservation).
func TestRemoteFreesAnnounceOnce(t *testing.T) {
	a, err := impl.New(impl.Options{Reserve: 8 * spec.SuperblockSize})
	must(t, err)
	defer a.Close()
	c, _ := a.NewCache()
	d, _ := a.NewCache()
	objs := allocObjects(t, c, 256, spec.ClassObjects(spec.SizeToClass(256))) // the whole superblock
	i := sbOf(a, objs[0])
	must(t, d.Free(objs[0]))
	must(t, d.Free(objs[1]))
	s := a.Snapshot()
	n := 0
	for _, cs := range s.Caches {
		for _, j := range cs.Notify {
			if j == i {
				n++
			}
		}
	}
	if n != 1 {
		t.Fatalf("superblock %d is on the notification stacks %d times after two remote frees, want 1", i, n)
	}
	got := allocObjects(t, c, 256, 2) // the refill drains: both collected, handed out again
	if addrOf(got[0]) != addrOf(objs[0]) || addrOf(got[1]) != addrOf(objs[1]) {
		t.Errorf("the refill handed out %#x and %#x, not the two objects freed remotely", addrOf(got[0]), addrOf(got[1]))
	}
}

// TestCollectClearsEveryPendingBit (CONSERVE: every object is in exactly one
// place): the owner's collection of a remote free of a group's last object
// (bit 31) moves it to the free bitmap and clears its pending bit, and the
// object is handed out again. Slip: the collection clears 31 bits of the
// word (collectmaskshort): bit 31 stays pending on a free object, and the
// allocation that holds it goes round collecting it (in mutant builds
// allocSlow panics after 65536 rounds).
func TestCollectClearsEveryPendingBit(t *testing.T) {
	a, err := impl.New(impl.Options{Reserve: 8 * spec.SuperblockSize})
	must(t, err)
	defer a.Close()
	c, _ := a.NewCache()
	d, _ := a.NewCache()
	objs := allocObjects(t, c, 256, 32) // group 0
	i := sbOf(a, objs[0])
	must(t, d.Free(objs[31]))
	c.Flush() // collects it
	for _, s := range a.Snapshot().Superblocks {
		if s.Index == i && s.Pending[0] != 0 {
			t.Fatalf("after the owner's Flush superblock %d has pending bits %#x in group 0", i, s.Pending[0])
		}
	}
	if got := allocN(t, c, 256); addrOf(got) != addrOf(objs[31]) {
		t.Errorf("the refill handed out %#x, not the object collected, %#x", addrOf(got), addrOf(objs[31]))
	}
}

// TestGroupTakenWithNothingPending (FREE-DOUBLE: a pending bit on a free
// object is a double free, found before the object is held again): the
// allocation that takes back a group holding a stale remote free of one of
// its free objects takes it through takeGroup, which collects the group
// first: the double free is counted then, and no held object has a free
// pending. Slip: the first step of allocSlow (and of the front's pinned
// refill), takeGroupPinned, takes the group without looking at its pending
// bits (pinnedtakepending): the pending bit rides into the held group
// uncounted, until its object is next to go out.
func TestGroupTakenWithNothingPending(t *testing.T) {
	a, err := impl.New(impl.Options{Reserve: 8 * spec.SuperblockSize})
	must(t, err)
	defer a.Close()
	c, _ := a.NewCache()
	d, _ := a.NewCache()
	objs := allocObjects(t, c, 256, 64) // groups 0 and 1, nothing held
	i := sbOf(a, objs[0])
	must(t, c.Free(objs[5]))
	must(t, c.Free(objs[6]))
	if err := d.Free(objs[6]); err != nil { // stale: pending on a free object
		t.Fatalf("the stale remote free: %v", err)
	}
	if got := allocN(t, c, 256); addrOf(got) != addrOf(objs[5]) {
		t.Fatalf("Alloc handed out %#x, want the lowest free object %#x", addrOf(got), addrOf(objs[5]))
	}
	if n := a.Stats().DoubleFrees; n != 1 {
		t.Errorf("DoubleFrees %d after the group with the stale free was taken, want 1", n)
	}
	for _, s := range a.Snapshot().Superblocks {
		if s.Index == i && s.Pending[0] != 0 {
			t.Errorf("group 0 is held with pending bits %#x", s.Pending[0])
		}
	}
}

// TestFrontTailFreeInvalid (FREE-INVALID): for every class whose objects do
// not fill the superblock, the slot one past the last object of a superblock
// the front's P cache owns, freed through Allocator.Free on that P (one P:
// the pinned free of its own superblock), is an invalid pointer and changes
// nothing. TestTailFreedByEveryone frees through the front into a
// superblock a Cache owns, which the front frees remotely. Slip: the pinned
// free's index check is <= the object count (fronttail).
func TestFrontTailFreeInvalid(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1)) // one P: the cache that allocated frees
	for k := range spec.NumClasses {
		size, objects := spec.ClassSize(k), spec.ClassObjects(k)
		if size*objects == spec.SuperblockSize {
			continue
		}
		a, err := impl.New(impl.Options{Reserve: 4 * spec.SuperblockSize})
		must(t, err)
		x, err := a.Alloc(size)
		must(t, err)
		must(t, a.Free(x)) // the entry filled, "mine"
		x, err = a.Alloc(size)
		must(t, err)
		rel := int(addrOf(x) & (spec.SuperblockSize - 1))
		tail := unsafe.Slice((*byte)(unsafe.Add(unsafe.Pointer(unsafe.SliceData(x)), size*objects-rel)), size)
		if err := a.Free(tail); !errors.Is(err, impl.ErrInvalidPointer) {
			t.Errorf("class %d: the front's free of its superblock's tail: %v, want ErrInvalidPointer", k, err)
		}
		must(t, a.Free(x))
		// No Flush: the counter is published at once, and a Flush would wait
		// for good on a token a failed free kept (mutant tokenleak, which
		// invariants.frontIdle kills).
		if n := a.Stats().InvalidFrees; n != 1 {
			t.Errorf("class %d: InvalidFrees %d, want 1", k, n)
		}
		a.Close()
	}
}
