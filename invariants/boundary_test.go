package invariants_test

import (
	"errors"
	"fmt"
	"testing"
	"unsafe"

	"github.com/refalloc/refalloc/impl"
	"github.com/refalloc/refalloc/invariants"
	"github.com/refalloc/refalloc/oracle"
	"github.com/refalloc/refalloc/spec"
)

// TestBoundaries runs every edge through the Harness, which checks each
// outcome against the model, each free against ExpectFree, and every
// invariant after every call; the test adds the outcomes the brief names
// (ErrInvalidPointer at every tail, in place or not), so that they cannot
// quietly become something else the model also allows. Sizes come from the
// raw table (spec.ClassSize, spec.ClassObjects) and literal page arithmetic,
// never from the helpers impl uses. The frees and Reallocs run with every way
// count, with and without debug mode (the paths that differ); the sizes, which
// depend on neither, in two of them, to keep the test fast. Under -race only
// those two run: the edges are walked on one goroutine, where the detector
// has nothing to find and costs 6× (CI's 25 minutes); every other build runs
// all twelve.
func TestBoundaries(t *testing.T) {
	for _, ways := range []int{1, 8, 16, 32, 64, 128} {
		for _, debug := range []bool{false, true} {
			if raceEnabled && !(ways == 1 && !debug || ways == 128 && debug) {
				continue
			}
			t.Run(fmt.Sprintf("ways=%d,debug=%v", ways, debug), func(t *testing.T) {
				h, err := invariants.NewHarness(impl.Options{Reserve: 64 * spec.SuperblockSize, SuperblockCacheWays: ways, Debug: debug})
				must(t, err)
				defer func() { must(t, h.Close()) }()
				h.CheckEachStep = true
				b := &bounds{t: t, h: h}
				b.owner, err = h.NewCache()
				must(t, err)
				b.other, err = h.NewCache()
				must(t, err)
				t.Run("tails", b.tails)
				if ways == 1 && !debug || ways == 128 && debug {
					t.Run("reservation", b.reservation)
					t.Run("sizes", b.sizes)
					t.Run("aligned", b.aligned)
					t.Run("realloc large", b.reallocLarge)
				}
				t.Run("realloc small", b.reallocSmall)
				t.Run("realloc stale", b.reallocStale)
				t.Run("front shards", b.frontShards)
				must(t, h.FreeAll())
			})
		}
	}
}

type bounds struct {
	t            *testing.T
	h            *invariants.Harness
	owner, other int
}

// quiet checks what holds at a quiescent point between the sections: Stats
// and Leaks against the model.
func (b *bounds) quiet(t *testing.T) {
	t.Helper()
	must(t, b.h.Stats())
	must(t, b.h.Leaks())
}

// alloc allocates n bytes on cache id, which must succeed, and returns the address.
func (b *bounds) alloc(t *testing.T, id, n, align int) uintptr {
	t.Helper()
	must(t, b.h.Alloc(id, n, align))
	if b.h.LastErr != nil {
		t.Fatalf("Alloc(%d, align %d) on cache %d: %v", n, align, id, b.h.LastErr)
	}
	return b.h.LastAddr
}

func invalid(t *testing.T, h *invariants.Harness, what string) {
	t.Helper()
	if !errors.Is(h.LastErr, impl.ErrInvalidPointer) {
		t.Fatalf("%s: %v, want ErrInvalidPointer (FREE-INVALID)", what, h.LastErr)
	}
}

// tails: for every class k, the tail of a superblock (the first byte past its
// last object, ClassObjects(k)*ClassSize(k), when that is inside the
// superblock) and the last object's last byte, freed by the owner, by another
// cache (twice: a miss, then a hit on the entry the miss filled) and by the
// Allocator; then the same tail once the superblock is back in the pool.
func (b *bounds) tails(t *testing.T) {
	h := b.h
	for k := range spec.NumClasses {
		size, objs := spec.ClassSize(k), spec.ClassObjects(k)
		a := b.alloc(t, b.owner, size, 1)
		obj := h.Object(a)
		rel := int((a - h.M.Base()) % spec.SuperblockSize)
		tail := objs*size < spec.SuperblockSize
		for _, id := range []int{b.owner, b.other, b.other, invariants.Front} {
			if tail {
				must(t, h.FreeTail(id, a, false))
				invalid(t, h, fmt.Sprintf("class %d: free of the superblock's tail (offset %d) on cache %d", k, objs*size, id))
			}
			must(t, h.FreeTail(id, a, true))
			invalid(t, h, fmt.Sprintf("class %d: free of the last object's last byte on cache %d", k, id))
		}
		must(t, h.Free(b.owner, a))
		must(t, h.FlushAll())
		s := h.A.Snapshot()
		i := int((a - s.Base) / spec.SuperblockSize)
		for _, st := range s.Superblocks {
			if st.Index == i && (st.State != impl.SBPool || st.Class != k) {
				t.Fatalf("class %d: superblock %d is %v of class %d after everything was freed, not pooled", k, i, st.State, st.Class)
			}
		}
		for _, id := range []int{b.owner, b.other, invariants.Front} {
			if tail {
				must(t, h.FreeOffset(id, obj, objs*size-rel))
				invalid(t, h, fmt.Sprintf("class %d: free of a pooled superblock's tail on cache %d", k, id))
			}
			must(t, h.FreeOffset(id, obj, objs*size-rel-1))
			invalid(t, h, fmt.Sprintf("class %d: free of a pooled superblock's last byte on cache %d", k, id))
		}
	}
	b.quiet(t)
}

// reservation: Alloc of the whole reservation succeeds when the pool is whole
// (OOM-REAL), one byte less too (the same pages), one byte more is ErrTooLarge.
func (b *bounds) reservation(t *testing.T) {
	h := b.h
	must(t, h.FreeAll())
	n := int(h.M.Size())
	for _, id := range []int{b.owner, invariants.Front} {
		for _, m := range []int{n, n - 1} {
			must(t, h.Alloc(id, m, 1))
			if h.LastErr != nil {
				t.Fatalf("Alloc(%d) of a %d-byte reservation with nothing in use: %v", m, n, h.LastErr)
			}
			must(t, h.Free(id, h.LastAddr))
			must(t, h.FlushAll())
		}
		must(t, h.Alloc(id, n+1, 1))
		if !errors.Is(h.LastErr, impl.ErrTooLarge) {
			t.Fatalf("Alloc(%d) past the reservation: %v", n+1, h.LastErr)
		}
	}
	b.quiet(t)
}

// sizes: every class's size and one more, and the page boundaries above
// MaxSmall (invariants.EdgeSizes), on a cache and on the Allocator.
func (b *bounds) sizes(t *testing.T) {
	h := b.h
	for _, n := range invariants.EdgeSizes(int(h.M.Size())) {
		for _, id := range []int{b.owner, invariants.Front} {
			if n > int(h.M.Size()) {
				must(t, h.Alloc(id, n, 1)) // ErrTooLarge, by the model
				continue
			}
			must(t, h.Free(id, b.alloc(t, id, n, 1)))
		}
		must(t, h.FlushAll()) // the current superblocks of every class would fill the reservation
	}
	b.quiet(t)
}

// aligned: every power-of-two alignment to 64 KiB with sizes around it, and
// alignments that are not powers of two or too large (ErrInvalidSize).
func (b *bounds) aligned(t *testing.T) {
	h := b.h
	for s := 0; s <= spec.SuperblockShift; s++ {
		align := 1 << s
		for _, n := range []int{0, 1, align - 1, align, align + 1, spec.MaxSmall, spec.MaxSmall + 1} {
			must(t, h.Free(b.owner, b.alloc(t, b.owner, n, align)))
		}
	}
	for _, align := range []int{0, -1, -8, 3, 6, 12, 24, 48, 1000, 3 << 10, spec.MaxAlign + 1, 2 * spec.MaxAlign, 1 << 20} {
		must(t, h.Alloc(b.owner, 8, align))
		if !errors.Is(h.LastErr, impl.ErrInvalidSize) {
			t.Fatalf("AllocAligned(8, %d): %v, want ErrInvalidSize", align, h.LastErr)
		}
	}
	must(t, h.FlushAll())
	b.quiet(t)
}

// realloc resizes the live object at a on cache id to n and requires it to
// stay in place or move, as said; it returns the object's address after.
func (b *bounds) realloc(t *testing.T, id int, a uintptr, n int, inPlace bool) uintptr {
	t.Helper()
	must(t, b.h.Realloc(id, a, n))
	if b.h.LastErr != nil {
		t.Fatalf("Realloc(%#x, %d) on cache %d: %v", a, n, id, b.h.LastErr)
	}
	if got := b.h.LastAddr == a; got != inPlace {
		t.Fatalf("Realloc(%#x, %d) on cache %d: in place %v, want %v", a, n, id, got, inPlace)
	}
	return b.h.LastAddr
}

// reallocSmall: for every class, Realloc at its bounds: in place down to the
// least size of the class and back up to its size on the owner; on another
// cache and on the Allocator (which owns none of these), a move; below the
// class and past it, a move.
func (b *bounds) reallocSmall(t *testing.T) {
	h := b.h
	for k := range spec.NumClasses {
		size, lo := spec.ClassSize(k), 0
		if k > 0 {
			lo = spec.ClassSize(k-1) + 1
		}
		a := b.alloc(t, b.owner, size, 1)
		a = b.realloc(t, b.owner, a, lo, true)   // shrink in place
		a = b.realloc(t, b.owner, a, size, true) // and grow back
		a = b.realloc(t, b.other, a, size, false)
		a = b.realloc(t, invariants.Front, a, lo, false)
		if k > 0 {
			a = b.realloc(t, h.Owner(a), a, lo-1, false)
		}
		a = b.realloc(t, b.other, a, size+1, false)
		must(t, h.Free(h.Owner(a), a))
		must(t, h.FlushAll())
	}
	b.quiet(t)
}

// reallocLarge: large objects of p pages (AllocAligned to 64 KiB, which no class
// is, so that a few pages are large too), resized on any cache to its page
// boundaries: in place exactly when n stays large (the object is alone, so
// the superblocks after it are free to grow into).
func (b *bounds) reallocLarge(t *testing.T) {
	h := b.h
	const page = spec.PageSize
	for _, p := range []int{1, 2, 3, 9, 15, 16, 17, 31, 32, 33, 48} {
		o := oracle.Object{Class: spec.Large, Usable: p * page}
		for _, n := range invariants.ReallocSizes(o) {
			for _, id := range []int{b.owner, b.other, invariants.Front} {
				a := b.alloc(t, id, (p-1)*page+1, spec.MaxAlign)
				a = b.realloc(t, id, a, n, n > spec.MaxSmall)
				must(t, h.Free(id, a))
			}
		}
		must(t, h.FlushAll())
	}
	must(t, h.FlushAll())
	b.quiet(t)
}

// reallocStale: Realloc of freed objects in their own class, whose slot is free
// in the owner's superblock, or (a class of one group, so the refill after a
// flush takes them back) held by the owner: taken at refill, not handed out.
// On the owner, another cache and the Allocator: never resized in place, never
// returned itself (FREE-DOUBLE). And a freed large object over a small
// superblock.
func (b *bounds) reallocStale(t *testing.T) {
	h := b.h
	for _, size := range []int{8, 112, 1024, 2048, 4096, 8192} {
		var objs [3]uintptr
		for i := range objs {
			objs[i] = b.alloc(t, b.owner, size, 1)
		}
		x1 := h.Object(objs[1])
		must(t, h.Free(b.owner, objs[0]))
		must(t, h.Free(b.owner, objs[1]))
		for _, id := range []int{b.owner, b.other, invariants.Front} {
			must(t, h.ReallocSlice(id, x1, size)) // free in the superblock
		}
		if spec.ClassObjects(oracle.ClassOf(size, 1)) > 32 {
			continue
		}
		must(t, h.Flush(b.owner))
		if a := b.alloc(t, b.owner, size, 1); a != objs[0] { // the refill holds x1 and hands out x0
			t.Fatalf("class of %d: the refill handed out %#x, not the lowest free %#x", size, a, objs[0])
		}
		for _, id := range []int{b.other, invariants.Front, b.owner} {
			must(t, h.ReallocSlice(id, x1, size-1)) // held by the owner
		}
	}
	// A stale large slice (cap past MaxSmall) at the start of a superblock
	// that is small now, its slot there free, on the superblock's owner: n
	// may be past MaxSmall too. (The slice is made, not kept from a freed
	// large object, so that the pool's order does not decide where it is.)
	must(t, h.FlushAll())
	x0, x1 := b.alloc(t, b.owner, 48, 1), b.alloc(t, b.owner, 48, 1) // a class the loop left nothing in
	if (x0-h.M.Base())%spec.SuperblockSize != 0 {
		t.Fatalf("the first object of a fresh superblock is at %#x, not at its start", x0)
	}
	stale := unsafe.Slice(unsafe.SliceData(h.Object(x0)), 9*spec.PageSize)
	must(t, h.Free(b.owner, x0))
	for _, n := range []int{spec.MaxSmall + 1, 9 * spec.PageSize, 100} {
		must(t, h.ReallocSlice(b.owner, stale, n))
	}
	must(t, h.Free(b.owner, x1))
	must(t, h.FlushAll())
	b.quiet(t)
}

// frontShards: calls on the Allocator (the Harness spreads them over every
// internal cache of the front: its per-P caches and shards) until every one
// holds objects; then Allocator.Flush must empty them all,
// and Trim must flush them and return every pooled superblock to the OS (the
// Harness checks both).
func (b *bounds) frontShards(t *testing.T) {
	h := b.h
	for i := 0; !everyShardHolds(h.A.Snapshot()); i++ {
		if i == 4096 {
			t.Fatal("could not reach every internal cache of the front: the Harness's spreading (Harness.call) no longer works")
		}
		var err error
		down(16*(i/16), func() { err = h.Alloc(invariants.Front, 8+i%64, 1) })
		must(t, err)
	}
	b.quiet(t) // held objects are not live: Leaks must not list them
	must(t, h.Flush(invariants.Front))
	for i := 0; !everyShardHolds(h.A.Snapshot()); i++ {
		if i == 4096 {
			t.Fatal("could not reach every internal cache of the front again")
		}
		must(t, h.Realloc(invariants.Front, 0, 8+i%64))
	}
	for _, a := range h.Live() {
		must(t, h.Free(h.Owner(a), a))
	}
	must(t, h.Trim())
	b.quiet(t)
}

func everyShardHolds(s *impl.Snapshot) bool {
	for _, c := range s.Caches {
		if c.Front && len(c.Held) == 0 {
			return false
		}
	}
	return true
}

var sink byte

// down runs f d frames of 8 KiB further down the stack.
//
//go:noinline
func down(d int, f func()) {
	if d == 0 {
		f()
		return
	}
	var pad [8 << 10]byte
	pad[d] = byte(d)
	down(d-1, f)
	sink += pad[d]
}
