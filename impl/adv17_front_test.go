package impl_test

import (
	"runtime"
	"testing"
	"unsafe"

	"github.com/refalloc/refalloc/impl"
	"github.com/refalloc/refalloc/spec"
)

// TestFrontAllocZeroesCapacity (ZEROED): an object the Allocator's Alloc
// hands out again reads zero through its capacity, not only through n. On one
// P, a hundred objects of a size below its class's are written to their
// capacity and freed, and the next hundred, which reuse them (a refill takes
// their dirty groups back), are read. Slip (adv17b 27, frontzeroeslen): the
// pinned Alloc zeroes n bytes; until now only invariants' TestBoundaries saw
// it.
func TestFrontAllocZeroesCapacity(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1)) // one P: its cache hands the freed objects out again
	a, err := impl.New(impl.Options{Reserve: 16 * spec.SuperblockSize})
	must(t, err)
	defer a.Close()
	for _, n := range []int{1, 17, 100, 1000} {
		freed := map[uintptr]bool{}
		var objs [][]byte
		for range 100 {
			b, err := a.Alloc(n)
			must(t, err)
			if len(b) != n || cap(b) <= n {
				t.Fatalf("setup: Alloc(%d) has len %d cap %d, want a capacity past n", n, len(b), cap(b))
			}
			b = b[:cap(b)]
			for i := range b {
				b[i] = 0xa5
			}
			objs = append(objs, b)
			freed[uintptr(unsafe.Pointer(&b[0]))] = true
		}
		for _, b := range objs {
			must(t, a.Free(b))
		}
		reused := 0
		objs = objs[:0]
		for range 100 {
			b, err := a.Alloc(n)
			must(t, err)
			objs = append(objs, b)
			if freed[uintptr(unsafe.Pointer(&b[0]))] {
				reused++
			}
			for i, v := range b[:cap(b)] {
				if v != 0 {
					t.Fatalf("Alloc(%d), cap %d: byte %d is %#x, want 0 through the capacity (ZEROED)", n, cap(b), i, v)
				}
			}
		}
		if reused == 0 {
			t.Fatalf("setup: Alloc(%d) reused none of the hundred objects freed", n)
		}
		for _, b := range objs {
			must(t, a.Free(b))
		}
	}
}

// TestFrontAllocAlignedAligns (ALIGN): every object the Allocator's
// AllocAligned returns is aligned, for sizes whose class's objects are not
// all aligned by themselves (48 bytes at 32 and 64, 80 at 32, 3000 at
// 4096 ...), and enough of them that the pinned fast path, not only the
// refill, hands them out. Slip (adv17b 29, frontalignedclass): the pinned
// AllocAligned takes the class of n alone; until now only invariants'
// TestBoundaries saw it.
func TestFrontAllocAlignedAligns(t *testing.T) {
	a, err := impl.New(impl.Options{Reserve: 32 * spec.SuperblockSize})
	must(t, err)
	defer a.Close()
	for _, c := range []struct{ n, align int }{{48, 32}, {48, 64}, {80, 32}, {96, 64}, {200, 128}, {3000, 4096}} {
		var objs [][]byte
		for range 40 {
			b, err := a.AllocAligned(c.n, c.align)
			must(t, err)
			objs = append(objs, b)
			if p := uintptr(unsafe.Pointer(&b[0])); p%uintptr(c.align) != 0 || len(b) != c.n {
				t.Fatalf("AllocAligned(%d, %d) = %#x, len %d: want aligned, len n (ALIGN)", c.n, c.align, p, len(b))
			}
		}
		for _, b := range objs {
			must(t, a.Free(b))
		}
	}
}
