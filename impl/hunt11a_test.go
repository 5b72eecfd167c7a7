package impl_test

import (
	"errors"
	"testing"
	"unsafe"

	"github.com/refalloc/refalloc/impl"
	"github.com/refalloc/refalloc/spec"
)

// Tests from a mutant hunt of Realloc (realloc.go), large objects (large.go)
// and the Allocator's options, pool and accounting (alloc.go).

// newAllocCache is an Allocator of opt, closed when the test ends, and a
// Cache of it.
func newAllocCache(t *testing.T, opt impl.Options) (*impl.Allocator, *impl.Cache) {
	t.Helper()
	a, err := impl.New(opt)
	must(t, err)
	t.Cleanup(func() { a.Close() })
	c, err := a.NewCache()
	must(t, err)
	return a, c
}

// fillWith writes v over all of b, up to its capacity.
func fillWith(b []byte, v byte) {
	for i := range b[:cap(b)] {
		b[:cap(b)][i] = v
	}
}

// holds fails t unless every byte of b, up to its capacity, is v.
func holds(t *testing.T, b []byte, v byte, what string) {
	t.Helper()
	for i, x := range b[:cap(b)] {
		if x != v {
			t.Fatalf("byte %d of %s is %#x, want %#x", i, what, x, v)
		}
	}
}

// TestLargeGrowInPlaceClearsDirtyTakenSuperblocks (ZEROED): a large object
// that grows in place over superblocks used before clears all of each, not
// only its first page. A one-superblock object is followed by a freed,
// fully written two-superblock one; growing the first to three superblocks
// takes them in place, and every byte past the first superblock reads zero.
// Slip: each dirty superblock taken is cleared up to one page only.
func TestLargeGrowInPlaceClearsDirtyTakenSuperblocks(t *testing.T) {
	_, c := newAllocCache(t, impl.Options{Reserve: 16 * sbBytes})
	x, err := c.Alloc(sbBytes)
	must(t, err)
	y, err := c.Alloc(2 * sbBytes)
	must(t, err)
	if addrOf(y) != addrOf(x)+sbBytes {
		t.Fatalf("second object at %#x, want right after the first at %#x", addrOf(y), addrOf(x)+sbBytes)
	}
	fillWith(y, 0xa5)
	must(t, c.Free(y))
	r, err := c.Realloc(x, 3*sbBytes)
	must(t, err)
	if addrOf(r) != addrOf(x) || cap(r) != 3*sbBytes {
		t.Fatalf("Realloc to 3 superblocks: %#x cap %d, want in place at %#x cap %d", addrOf(r), cap(r), addrOf(x), 3*sbBytes)
	}
	holds(t, r[sbBytes:], 0, "the grown object past its first superblock")
	must(t, c.Free(r))
}

// TestReallocStaleSliceOfLargerClass (FREE-DOUBLE, INTEGRITY): a Realloc of
// a stale slice is refused as its free would be, and writes nothing. A
// 128-byte object's slice outlives its superblock, which comes back carved
// for 64 bytes: the slice's address is object 2 of the new layout, freed,
// while objects 1 and 3 are live. Realloc(stale, 50) must be ErrDoubleFree
// and leave object 3 intact. Slip: resizable does not check that the
// slice's capacity is its class's size, takes the stale address for object
// 1 (128/128), finds that live, and clears the slice's 128-byte capacity
// past 50 in place, object 3 included.
func TestReallocStaleSliceOfLargerClass(t *testing.T) {
	_, c := newAllocCache(t, impl.Options{Reserve: 16 * sbBytes})
	x0, err := c.Alloc(128)
	must(t, err)
	stale, err := c.Alloc(128)
	must(t, err)
	must(t, c.Free(x0))
	must(t, c.Free(stale))
	c.Flush() // the superblock is empty: released to the pool
	var y [4][]byte
	for i := range y {
		y[i], err = c.Alloc(64)
		must(t, err)
		fillWith(y[i], 0x5a)
	}
	if addrOf(y[0]) != addrOf(x0) || addrOf(y[2]) != addrOf(stale) {
		t.Fatalf("the superblock was not reused for 64 bytes (%#x, %#x; want %#x, %#x)", addrOf(y[0]), addrOf(y[2]), addrOf(x0), addrOf(stale))
	}
	must(t, c.Free(y[2]))
	r, err := c.Realloc(stale, 50)
	if !errors.Is(err, impl.ErrDoubleFree) || r != nil {
		t.Errorf("Realloc of a stale 128-byte slice at a freed 64-byte object: %#x, %v; want ErrDoubleFree", addrOf(r), err)
	}
	holds(t, y[1], 0x5a, "live object 1 after the Realloc")
	holds(t, y[3], 0x5a, "live object 3 after the Realloc")
}

// TestReallocInteriorPointerRefused (FREE-INVALID, INTEGRITY): a Realloc of a
// slice that does not start an object slot is refused as its free would be
// (ErrInvalidPointer), and writes nothing. The slice starts 32 bytes into
// object 0 of the 64-byte class with the class's capacity; Realloc(b, 50)
// must leave object 1 intact. Slip: resizable does not check that the
// address is a slot start, takes it for object 0 (32/64), which is live,
// and clears [50, 64) of the slice in place: bytes 18 to 31 of object 1.
func TestReallocInteriorPointerRefused(t *testing.T) {
	_, c := newAllocCache(t, impl.Options{Reserve: 16 * sbBytes})
	x, err := c.Alloc(64)
	must(t, err)
	y, err := c.Alloc(64)
	must(t, err)
	if addrOf(y) != addrOf(x)+64 {
		t.Fatalf("second object at %#x, want %#x", addrOf(y), addrOf(x)+64)
	}
	fillWith(y, 0x5a)
	b := unsafe.Slice((*byte)(unsafe.Add(unsafe.Pointer(unsafe.SliceData(x)), 32)), 64)
	r, err := c.Realloc(b, 50)
	if !errors.Is(err, impl.ErrInvalidPointer) || r != nil {
		t.Errorf("Realloc of an interior pointer: %#x, %v; want ErrInvalidPointer", addrOf(r), err)
	}
	holds(t, y, 0x5a, "the live object after it, after the Realloc")
	must(t, c.Free(x))
	must(t, c.Free(y))
}

// TestReallocStaleSelfNamesItsClass (FREE-DOUBLE): a Realloc refused because
// Alloc handed out b's own address (b was freed) reports the class the
// address is an object of. Both objects of a 32 KiB superblock (class 54,
// the largest small class) are allocated and the first freed; Realloc(first,
// 32 KiB) gets that address back from Alloc and must say ErrDoubleFree with
// class 54. Slip: the class is taken for spec.Large when n is MaxSmall
// exactly (< for <=).
func TestReallocStaleSelfNamesItsClass(t *testing.T) {
	const size, class = 32 << 10, 54
	if spec.ClassSize(class) != size || spec.MaxSmall != size {
		t.Fatalf("class %d is %d bytes, MaxSmall %d: the test assumes 32 KiB for both", class, spec.ClassSize(class), spec.MaxSmall)
	}
	_, c := newAllocCache(t, impl.Options{Reserve: 16 * sbBytes})
	x, err := c.Alloc(size)
	must(t, err)
	y, err := c.Alloc(size)
	must(t, err)
	must(t, c.Free(x))
	r, err := c.Realloc(x, size)
	var fe *impl.FreeError
	if !errors.As(err, &fe) || !errors.Is(err, impl.ErrDoubleFree) || r != nil {
		t.Fatalf("Realloc of a freed 32 KiB object onto its own address: %v, %d bytes; want ErrDoubleFree", err, len(r))
	}
	if fe.Class != class || fe.Addr != addrOf(x) {
		t.Fatalf("the refusal names class %d at %#x, want class %d at %#x", fe.Class, fe.Addr, class, addrOf(x))
	}
	must(t, c.Free(y))
}
