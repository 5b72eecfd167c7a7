package impl_test

// Tests of hunt18, a mechanical mutation sweep (go/ast: relational flips,
// && and ||, negated conditions, literals ±1, + and -, dropped statements)
// over alloc.go, superblock.go, remote.go, front_pinned.go, large.go and
// realloc.go. Each names its rule and the slip it kills.

import (
	"errors"
	"testing"
	"unsafe"

	"github.com/refalloc/refalloc/impl"
	"github.com/refalloc/refalloc/spec"
)

// TestReallocSliceAtReservationEnd (FREE-INVALID: a Realloc is refused as a
// free of its slice would be): a slice that starts exactly at the end of the
// reservation is not an object; a Realloc that could keep it in place (n at
// most its capacity) must find it outside before it looks up its header. The
// reservation is 512 superblocks, one chunk of headers: the header table has
// no entry past it. Slip: resizable's bounds check lets off == size through
// (resizableend): the lookup indexes the header table past its end and
// panics.
func TestReallocSliceAtReservationEnd(t *testing.T) {
	if raceEnabled {
		t.Skip("the Go-heap backend: a pointer past the reservation's arena is another Go object (checkptr)")
	}
	const nsb = 512
	a, err := impl.New(impl.Options{Reserve: nsb * spec.SuperblockSize})
	must(t, err)
	defer a.Close()
	c, _ := a.NewCache()
	front := allocN(t, c, (nsb-1)*spec.SuperblockSize) // superblocks 0-510
	last := allocN(t, c, spec.MaxSmall+1)              // superblock 511, the last
	if sbOf(a, last) != nsb-1 {
		t.Fatalf("setup: the second large object is in superblock %d, want %d", sbOf(a, last), nsb-1)
	}
	must(t, c.Free(front)) // room for the small object a moving Realloc allocates
	end := unsafe.Slice((*byte)(unsafe.Add(unsafe.Pointer(unsafe.SliceData(last)), spec.SuperblockSize)), 64)[:0]
	if r, err := c.Realloc(end, 16); !errors.Is(err, impl.ErrInvalidPointer) {
		t.Fatalf("Realloc of a slice at the reservation's end: %d bytes, %v; want ErrInvalidPointer", len(r), err)
	}
	must(t, c.Free(last))
	must(t, c.Close())
}

// TestGenerationStepsByOne (CACHE-COHERENT): each period of a superblock
// ends with its generation advanced by exactly one, so that the count
// reaches DeadTag-1, the last generation before the wrap, from wherever it
// starts, and the wrap there retires the remote set: a generation recurs only
// with a new set. From DeadTag-3 the periods end at DeadTag-2, DeadTag-1, 0
// and 1. Slip: nextGen's next generation is gen+2 (genstep): from an odd
// distance the count passes over DeadTag-1, takes DeadTag itself as a
// generation, and wraps without retiring the set, so that an entry from 2^32
// periods before matches it again.
func TestGenerationStepsByOne(t *testing.T) {
	a, err := impl.New(impl.Options{Reserve: 4 * spec.SuperblockSize})
	must(t, err)
	defer a.Close()
	c, _ := a.NewCache()
	x := allocN(t, c, 64)
	i := sbOf(a, x)
	must(t, c.Free(x))
	c.Flush() // releases the superblock
	must(t, impl.FastForward(a, i, impl.DeadTag-3))
	for n, want := range []uint32{impl.DeadTag - 2, impl.DeadTag - 1, 0, 1} {
		y := allocN(t, c, 64)
		if sbOf(a, y) != i {
			t.Fatalf("period %d: the object is in superblock %d, want %d", n, sbOf(a, y), i)
		}
		must(t, c.Free(y))
		c.Flush()
		if g := genOf(t, a, i); g != want {
			t.Fatalf("after period %d from DeadTag-3: generation %d, want %d", n, g, want)
		}
	}
	must(t, c.Close())
}

// TestRemoteBadFreeNamesAddress (FREE-DOUBLE, FREE-INVALID: a rejected free
// is a FreeError naming the address passed and the class it falls in): a
// remote double free, refused at once since its first free is still
// pending, and a remote free of an interior pointer, refused as not a slot
// start. Slip: the remote double free's error names base-off, not base+off
// (remoteerraddr).
func TestRemoteBadFreeNamesAddress(t *testing.T) {
	a, err := impl.New(impl.Options{Reserve: 4 * spec.SuperblockSize})
	must(t, err)
	defer a.Close()
	c, _ := a.NewCache()
	d, _ := a.NewCache()
	const size = 64
	k := spec.SizeToClass(size)
	x, y := allocN(t, c, size), allocN(t, c, size) // y at offset 64: base-off is not base+off
	must(t, d.Free(y))                             // remote: pending
	for _, tc := range []struct {
		what string
		b    []byte
		want error
	}{
		{"a remote double free", y, impl.ErrDoubleFree},
		{"a remote free of an interior pointer", x[8:], impl.ErrInvalidPointer},
	} {
		err := d.Free(tc.b)
		var fe *impl.FreeError
		if !errors.As(err, &fe) || !errors.Is(err, tc.want) || fe.Addr != addrOf(tc.b) || fe.Class != k {
			t.Fatalf("%s of %#x (class %d): %v, want %v naming the address and class", tc.what, addrOf(tc.b), k, err, tc.want)
		}
	}
	must(t, d.Free(x))
	c.Flush()
	must(t, c.Close())
	must(t, d.Close())
}

// TestStalePoolFreePastLastSlot (FREE-INVALID, FREE-DOUBLE: a free into a
// pooled superblock is a double free only at a slot start of its last
// layout): in a class whose objects leave a tail in the superblock, the
// first address past the last object is a multiple of the size but no slot.
// After the superblock is released, a free there is invalid, and a free of
// object 0 a double free. Slip: stalePoolFree's bound takes the index one
// past the last object for a slot (stalepooltail): the tail is reported as a
// double free.
func TestStalePoolFreePastLastSlot(t *testing.T) {
	k := -1
	for j := range spec.NumClasses {
		if spec.ClassObjects(j)*spec.ClassSize(j) < spec.SuperblockSize {
			k = j
			break
		}
	}
	if k < 0 {
		t.Fatal("setup: no class leaves a tail in its superblock")
	}
	size, objects := spec.ClassSize(k), spec.ClassObjects(k)
	a, err := impl.New(impl.Options{Reserve: 4 * spec.SuperblockSize})
	must(t, err)
	defer a.Close()
	c, _ := a.NewCache()
	x := allocN(t, c, size)
	if (addrOf(x)-a.Snapshot().Base)%spec.SuperblockSize != 0 {
		t.Fatalf("setup: the first object of a fresh superblock is not at its start")
	}
	must(t, c.Free(x))
	c.Flush() // releases the superblock: pooled, its last class kept
	if st := sbState(t, a, sbOf(a, x)); st.State != impl.SBPool {
		t.Fatalf("setup: the superblock is %v, want pooled", st.State)
	}
	tail := unsafe.Slice((*byte)(unsafe.Add(unsafe.Pointer(unsafe.SliceData(x)), objects*size)), size)
	if err := c.Free(tail); !errors.Is(err, impl.ErrInvalidPointer) {
		t.Fatalf("free of offset %d in a pooled superblock of class %d (%d objects of %d bytes): %v, want ErrInvalidPointer", objects*size, k, objects, size, err)
	}
	if err := c.Free(x); !errors.Is(err, impl.ErrDoubleFree) {
		t.Fatalf("free of object 0 of a pooled superblock of class %d: %v, want ErrDoubleFree", k, err)
	}
	must(t, c.Close())
}

// TestGrowIntoExactRunLeavesPool (NO-OVERLAP: a superblock is in one run of
// the pool or in one use): a large object that grows in place into a free
// run exactly as long as it needs takes the whole run out of the pool. Slip:
// takeRunAt leaves a run it takes whole in the pool (growexactkept): the
// next large allocation is handed the superblock the grown object holds.
func TestGrowIntoExactRunLeavesPool(t *testing.T) {
	a, err := impl.New(impl.Options{Reserve: 8 * spec.SuperblockSize})
	must(t, err)
	defer a.Close()
	c, _ := a.NewCache()
	x := allocN(t, c, spec.SuperblockSize) // superblock 0
	y := allocN(t, c, spec.SuperblockSize) // superblock 1
	z := allocN(t, c, spec.SuperblockSize) // superblock 2: the run after y ends at it
	must(t, c.Free(y))                     // the pool: [1, 2) and [3, 8)
	g, err := c.Realloc(x, 2*spec.SuperblockSize)
	must(t, err)
	if addrOf(g) != addrOf(x) {
		t.Fatalf("setup: the grow into the free run of one superblock after it moved the object")
	}
	for _, r := range a.Snapshot().FreeRuns {
		if r.Start <= 1 && 1 < r.Start+r.N {
			t.Fatalf("after the grow into superblock 1 the pool still holds it: runs %v", a.Snapshot().FreeRuns)
		}
	}
	w := allocN(t, c, spec.SuperblockSize)
	if addrOf(w) < addrOf(g)+uintptr(cap(g)) {
		t.Fatalf("a large object at %#x inside the grown one [%#x, %#x)", addrOf(w), addrOf(g), addrOf(g)+uintptr(cap(g)))
	}
	for _, b := range [][]byte{g, z, w} {
		must(t, c.Free(b))
	}
	must(t, c.Close())
}
