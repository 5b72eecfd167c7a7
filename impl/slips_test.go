package impl_test

// Tests from a mutant hunt of the front, guard mode, the statistics and debug
// mode: each closes a one-line slip the rest of the suite let through (named
// in its comment), checked deterministically, on one P where the front's
// per-P cache matters.

import (
	"errors"
	"fmt"
	"runtime"
	"strings"
	"testing"
	"unsafe"

	"github.com/refalloc/refalloc/impl"
	"github.com/refalloc/refalloc/spec"
)

// TestFrontBadAlignment (ALIGN: an alignment that is not a power of two in
// [1, MaxAlign] is ErrInvalidSize, whoever serves the call): the Allocator's
// own AllocAligned refuses the alignments TestBadInput gives a Cache, also
// when the class they would map to has a held group on the P's cache, which
// the pinned fast path would pop from. On one P that cache is always the
// same. Slips: the fast path skips the alignment check; allocSlow takes an
// alignment up to 1 for a plain Alloc.
func TestFrontBadAlignment(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	a, err := impl.New(impl.Options{Reserve: 32 * spec.SuperblockSize})
	must(t, err)
	defer a.Close()
	warm, err := a.Alloc(8) // a held group of the 8-byte class on P 0's cache
	must(t, err)
	for _, align := range []int{0, 3, -16, 2 * spec.MaxAlign} {
		b, err := a.AllocAligned(8, align)
		if !errors.Is(err, impl.ErrInvalidSize) || b != nil {
			t.Errorf("Allocator.AllocAligned(8, %d) = %d bytes, %v; want ErrInvalidSize", align, cap(b), err)
		}
	}
	must(t, a.Free(warm))
}

// TestFrontInteriorFree (FREE-INVALID): the Allocator's pinned local free
// refuses a pointer inside a live object, as Cache.free does (TestBadInput):
// the slot index its division gives is exact only at a slot start. On one P
// the first free fills the P's entry for its own superblock, so the others
// are the pinned local path's. Slip: the fast path tests idx*size <= rel,
// which every offset passes, and frees the object the pointer is inside.
func TestFrontInteriorFree(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	a, err := impl.New(impl.Options{Reserve: 32 * spec.SuperblockSize})
	must(t, err)
	defer a.Close()
	first, err := a.Alloc(100)
	must(t, err)
	b, err := a.Alloc(100)
	must(t, err)
	must(t, a.Free(first))
	for _, off := range []int{1, 16, cap(b) - 1} {
		if err := a.Free(b[:cap(b)][off:]); !errors.Is(err, impl.ErrInvalidPointer) {
			t.Errorf("Allocator.Free of byte %d of a live %d-byte object: %v, want ErrInvalidPointer", off, cap(b), err)
		}
	}
	must(t, a.Free(b)) // still live
	if s := a.Stats(); s.InvalidFrees != 3 {
		t.Errorf("%d invalid frees counted, want 3", s.InvalidFrees)
	}
}

// TestStatsStringShowsEveryActiveClass (STATS-LEAD, STATS-LAG: the table
// prints Allocs, an upper bound, and Frees, a lower bound, for every class
// with activity): a class whose objects are all still live has frees 0 and
// still gets its row, as does one with frees published. Slip: String skips a
// class when either counter is 0.
func TestStatsStringShowsEveryActiveClass(t *testing.T) {
	needClassCounters(t)
	a, err := impl.New(impl.Options{Reserve: 16 * spec.SuperblockSize})
	must(t, err)
	defer a.Close()
	c, _ := a.NewCache()
	defer c.Close()
	live, err := c.Alloc(100)
	must(t, err)
	freed, err := c.Alloc(1000)
	must(t, err)
	must(t, c.Free(freed))
	c.Flush()
	s := a.Stats()
	out := s.String()
	for _, n := range []int{100, 1000} {
		k := spec.SizeToClass(n)
		row := fmt.Sprintf("%5d %7d %7d %14d %14d", k, spec.ClassSize(k), spec.ClassObjects(k), s.Classes[k].Allocs, s.Classes[k].Frees)
		if !strings.Contains(out, row) {
			t.Errorf("Stats.String has no row %q for class %d (%d-byte objects):\n%s", row, k, n, out)
		}
	}
	must(t, c.Free(live))
}

// TestDebugTailFreeWritesNothing (DEBUG-POISON, FREE-INVALID: a free that
// fails writes nothing): in debug mode a free of the slot that would follow
// the last object of a superblock of 48-byte objects (1365 of them, 16 bytes
// of tail) is invalid, and poisons nothing: such a slot would run 32 bytes
// into the next superblock, here the start of a live 64-byte object. Slip:
// freeDebug's bound on the slot index is inclusive.
func TestDebugTailFreeWritesNothing(t *testing.T) {
	a, err := impl.New(impl.Options{Reserve: 8 * spec.SuperblockSize, Debug: true})
	must(t, err)
	defer a.Close()
	c, _ := a.NewCache()
	defer c.Close()
	small, err := c.Alloc(48)
	must(t, err)
	next, err := c.Alloc(64)
	must(t, err)
	base := addrOf(small) &^ (spec.SuperblockSize - 1)
	if addrOf(next) != base+spec.SuperblockSize {
		t.Fatalf("the 64-byte object is at %#x, not at the start of the superblock after %#x", addrOf(next), base)
	}
	for i := range next {
		next[i] = 0x11
	}
	tail := unsafe.Slice((*byte)(unsafe.Add(unsafe.Pointer(unsafe.SliceData(small)), base+1365*48-addrOf(small))), 16)
	if err := c.Free(tail); !errors.Is(err, impl.ErrInvalidPointer) {
		t.Errorf("free of the tail of a 48-byte superblock: %v, want ErrInvalidPointer", err)
	}
	for i, x := range next {
		if x != 0x11 {
			t.Fatalf("byte %d of the live object after the superblock is %#x after a refused free of its neighbour's tail", i, x)
		}
	}
	must(t, c.Free(small))
	must(t, c.Free(next))
}

// TestDebugReleaseVerifiesLastObject (DEBUG-POISON: before memory that held
// data is re-poisoned as its superblock is released, the poison is
// verified, and a write after free is reported once, naming the first byte
// written): writes after free into the last two bytes of the last object of
// a superblock (16 objects of 3936 bytes, all handed out) are one report, at
// the first of them, when the emptied superblock is released, as for any
// other object. Slips: verifyReleased stops one object short of zeroedFrom;
// verifyPoison goes on past the first byte and reports every one.
func TestDebugReleaseVerifiesLastObject(t *testing.T) {
	const size = 3936
	k := spec.SizeToClass(size)
	n := spec.ClassObjects(k)
	var reports []error
	a := newDebugReporting(t, &reports)
	c, _ := a.NewCache()
	objs := allocObjects(t, c, size, n)
	last := objs[0]
	for _, b := range objs {
		if addrOf(b) > addrOf(last) {
			last = b
		}
	}
	if off := addrOf(last) & (spec.SuperblockSize - 1); off != uintptr((n-1)*spec.ClassSize(k)) {
		t.Fatalf("the highest of %d objects of class %d is at offset %d of its superblock", n, k, off)
	}
	for _, b := range objs {
		must(t, c.Free(b))
	}
	last[:cap(last)][cap(last)-2] = 0x5a
	last[:cap(last)][cap(last)-1] = 0x5a
	must(t, c.Close()) // releases the empty superblock
	var waf *impl.WriteAfterFreeError
	if len(reports) != 1 || !errors.As(reports[0], &waf) || waf.Addr != addrOf(last) || waf.Offset != cap(last)-2 {
		t.Errorf("reports %v, want one write after free at byte %d of the object at %#x", reports, cap(last)-2, addrOf(last))
	}
	if s := a.Stats(); s.WriteAfterFrees != 1 {
		t.Errorf("%d writes after free counted, want 1", s.WriteAfterFrees)
	}
}
