package impl_test

// Tests of hunt14, a review of impl/cache.go's fast paths, refill order and
// partial threshold by injected one-line slips. Each names its rule and the
// slip it kills.

import (
	"errors"
	"os"
	"os/exec"
	"runtime"
	"testing"
	"unsafe"

	"github.com/refalloc/refalloc/impl"
	"github.com/refalloc/refalloc/spec"
)

// TestFrontFreeOnePastReservation (FREE-INVALID): Allocator.Free of the
// address one past the reservation is ErrInvalidPointer, as Cache.Free's is
// (TestFreeOnePastReservation), on the front's pinned free too: on a miss it
// fills the entry lock-free (Cache.fillPinned), which must leave an offset at
// or past the reservation's size to the slow path, as freeMiss does. With 512
// superblocks the headers are one chunk, and superblock 512's header is past
// it. Slip: fillPinned's bound is off > size (pinnedfillpast), and the pinned
// free reads a chunk that does not exist: a panic while pinned is fatal, so
// the frees run in a child process (this test binary).
func TestFrontFreeOnePastReservation(t *testing.T) {
	if os.Getenv("REFALLOC_PAST_CHILD") == "" {
		cmd := exec.Command(os.Args[0], "-test.run=^TestFrontFreeOnePastReservation$")
		cmd.Env = append(os.Environ(), "REFALLOC_PAST_CHILD=1")
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("Allocator.Free(base+size), in a child process: %v\n%s", err, out)
		}
		return
	}
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1)) // one P: the free is the pinned path's
	for _, nsb := range []int{512, 20} {
		a, err := impl.New(impl.Options{Reserve: nsb * spec.SuperblockSize})
		must(t, err)
		last, err := a.Alloc(8)
		must(t, err)
		s := a.Snapshot()
		end := unsafe.Slice((*byte)(unsafe.Add(unsafe.Pointer(unsafe.SliceData(last)), s.Base+s.Size-addrOf(last))), 8)
		if err := a.Free(end); !errors.Is(err, impl.ErrInvalidPointer) {
			t.Fatalf("%d superblocks: Allocator.Free(base+size): %v, want ErrInvalidPointer", nsb, err)
		}
		must(t, a.Free(last))
		must(t, a.Close())
	}
}

// TestHeldGroupCollectPublishes (STATS-EXACT, STATS-LAG): when the lowest
// held object has a remote free pending (a stale pointer's, found as a
// double free), the slow path collects the held group's remote word, and
// with it a legitimate remote free of another object of the group, live
// until then: that free is published like any collected one. Cache c takes
// objects 0 and 1 of the 64-byte class, holding 2 to 31; d frees object 1
// (live) and object 2 (held: a double free) remotely; c's next allocation
// collects both, and returns object 2. After the flushes: 3 allocations, 3
// frees, one double free. Slip: allocSlow's collection of the held group is
// not published (heldcollectnopub), and object 1's free is lost to
// Stats for good.
func TestHeldGroupCollectPublishes(t *testing.T) {
	needClassCounters(t)
	a, err := impl.New(impl.Options{Reserve: 16 * spec.SuperblockSize})
	must(t, err)
	defer a.Close()
	c, _ := a.NewCache()
	d, _ := a.NewCache()
	x, y := allocN(t, c, 64), allocN(t, c, 64)
	stale := unsafe.Slice((*byte)(unsafe.Add(unsafe.Pointer(unsafe.SliceData(x)), 2*64)), 64)
	must(t, d.Free(y))     // remote, live: pending
	must(t, d.Free(stale)) // remote, held: accepted, found later
	z := allocN(t, c, 64)
	if addrOf(z) != addrOf(stale) {
		t.Fatalf("third allocation at %#x, want object 2 at %#x", addrOf(z), addrOf(stale))
	}
	must(t, c.Free(x))
	must(t, c.Free(z))
	c.Flush()
	d.Flush()
	s := a.Stats()
	k := spec.SizeToClass(64)
	if cs := s.Classes[k]; cs.Allocs != 3 || cs.Frees != 3 || s.DoubleFrees != 1 {
		t.Fatalf("after the flushes: %d allocations, %d frees, %d double frees; want 3, 3, 1", cs.Allocs, cs.Frees, s.DoubleFrees)
	}
}
