package impl_test

import (
	"bytes"
	"errors"
	"testing"

	"github.com/refalloc/refalloc/impl"
	"github.com/refalloc/refalloc/spec"
)

func filled(t *testing.T, c *impl.Cache, n int) []byte {
	b, err := c.Alloc(n)
	must(t, err)
	for i := range b[:cap(b)] { // past len too: Realloc must not show it again
		b[:cap(b)][i] = byte(i%251 + 1)
	}
	return b
}

func prefixKept(t *testing.T, old, b []byte, keep int) {
	t.Helper()
	for i := range keep {
		if b[i] != byte(i%251+1) {
			t.Fatalf("byte %d not kept", i)
		}
	}
	if full := b[:cap(b)]; !bytes.Equal(full[keep:], make([]byte, len(full)-keep)) {
		t.Fatal("the bytes past those kept, up to cap, are not zero")
	}
}

func TestRealloc(t *testing.T) {
	a, err := impl.New(impl.Options{Reserve: 64 * spec.SuperblockSize})
	must(t, err)
	defer a.Close()
	t.Cleanup(func() { impl.CheckLeaks(t, a) })
	c, _ := a.NewCache()
	d, _ := a.NewCache()

	for _, tc := range []struct {
		name    string
		from, n int
		inPlace bool
	}{
		{"grow within the class", 100, 112, true},
		{"shrink within the class", 100, 97, true},
		{"grow to another class", 100, 113, false},
		{"shrink to another class", 100, 20, false},
		{"to zero", 100, 0, false},
		{"small to large", 3000, 100_000, false},
		{"large shrink in place", 200_000, 120_000, true},
		{"large grow within its pages", 200_000, 200_700, true},
		{"large shrink to less than half", 200_000, 90_000, true},
		{"large grow into free superblocks", 200_000, 500_000, true},
		{"large to small", 100_000, 500, false},
	} {
		b := filled(t, c, tc.from)
		r, err := c.Realloc(b, tc.n)
		must(t, err)
		if len(r) != tc.n || (addrOf(r) == addrOf(b)) != tc.inPlace {
			t.Fatalf("%s: len %d, in place %v, want %v", tc.name, len(r), addrOf(r) == addrOf(b), tc.inPlace)
		}
		prefixKept(t, b, r, min(tc.from, tc.n))
		if !tc.inPlace {
			if err := c.Free(b); !errors.Is(err, impl.ErrDoubleFree) && !errors.Is(err, impl.ErrInvalidPointer) {
				t.Fatalf("%s: the old object was not freed: %v", tc.name, err)
			}
		}
		must(t, c.Free(r))
	}

	// Realloc(nil, n) is Alloc.
	r, err := c.Realloc(nil, 40)
	must(t, err)
	must(t, c.Free(r))

	// Another cache's object moves, and the move frees it remotely.
	b := filled(t, c, 100)
	r, err = d.Realloc(b, 100)
	must(t, err)
	if addrOf(r) == addrOf(b) {
		t.Fatal("a remote object was resized in place")
	}
	prefixKept(t, b, r, 100)
	must(t, d.Free(r))

	// Failures leave b as it was, still live.
	b = filled(t, c, 100)
	for name, tc := range map[string]struct {
		n    int
		want error
	}{
		"negative":  {-1, impl.ErrInvalidSize},
		"too large": {spec.MaxAlloc + 1, impl.ErrTooLarge},
		"no room":   {60 * spec.SuperblockSize, impl.ErrOutOfMemory},
	} {
		if r, err := c.Realloc(b, tc.n); !errors.Is(err, tc.want) || r != nil {
			t.Fatalf("%s: %v, want %v", name, err, tc.want)
		}
		for i, x := range b[:cap(b)] {
			if x != byte(i%251+1) {
				t.Fatalf("%s: byte %d of b changed", name, i)
			}
		}
	}
	interior := b[:cap(b)][8:]
	if _, err := c.Realloc(interior, 50); !errors.Is(err, impl.ErrInvalidPointer) {
		t.Fatalf("interior: %v", err)
	}
	must(t, c.Free(b))
	if _, err := c.Realloc(b, 100); !errors.Is(err, impl.ErrDoubleFree) {
		t.Fatalf("after free: %v", err)
	}
	if _, err := c.Realloc(b, 500); !errors.Is(err, impl.ErrDoubleFree) {
		t.Fatalf("after free, moving: %v", err)
	}
	c.Flush()
	d.Flush()
	if s := a.Stats(); s.Large.LiveObjects != 0 {
		t.Fatalf("large objects left: %+v", s.Large)
	}
}

// A stale b is refused, never resized: not when Alloc hands its own address out
// again (freeing b would free the result), nor when it was large and its
// superblock is small now (its cap is past MaxSmall).
func TestReallocStale(t *testing.T) {
	a, err := impl.New(impl.Options{Reserve: 16 * spec.SuperblockSize})
	must(t, err)
	defer a.Close()
	t.Cleanup(func() { impl.CheckLeaks(t, a) })
	c, _ := a.NewCache()

	l, err := c.Alloc(200_000)
	must(t, err)
	must(t, c.Free(l))
	if r, err := c.Realloc(l, 200_000); !errors.Is(err, impl.ErrDoubleFree) || r != nil {
		t.Fatalf("Realloc of a freed large object onto its own pages: %v, %d bytes at %p (it was at %p)", err, len(r), r, l)
	}

	x, err := c.Alloc(100) // carves l's first superblock: x is at l's address
	must(t, err)
	y, err := c.Alloc(100)
	must(t, err)
	if addrOf(x) != addrOf(l) {
		t.Fatalf("the small object is at %p, not in the large object's superblock at %p", x, l)
	}
	must(t, c.Free(x))
	if _, err := c.Realloc(l, spec.MaxSmall+1); !errors.Is(err, impl.ErrDoubleFree) {
		t.Fatalf("Realloc of a stale large slice over a small superblock: %v", err)
	}
	must(t, c.Free(y))
	if s := a.Stats(); s.Large.LiveObjects != 0 {
		t.Fatalf("large objects left: %+v", s.Large)
	}
}

// TestLargeReallocInPlace (ZEROED, LARGE-EXACT, NO-OVERLAP): a large object
// grows in place into the free superblocks right after it, doubling as a
// growing buffer does, and shrinks in place giving its tail back; when the
// superblock after it is in use it moves, even though a run further on is
// free. Every step is checked against the model and every invariant.
func TestLargeReallocInPlace(t *testing.T) {
	h, ids := harness(t, impl.Options{Reserve: 64 * spec.SuperblockSize}, 1)
	c := ids[0]
	a := alloc(t, h, c, spec.MaxSmall+1)
	for n := 2 * spec.SuperblockSize; n <= 16*spec.SuperblockSize; n *= 2 {
		must(t, h.Realloc(c, a, n))
		if h.LastAddr != a {
			t.Fatalf("growing to %d into free superblocks moved it (%#x to %#x)", n, a, h.LastAddr)
		}
	}
	must(t, h.Realloc(c, a, 3*spec.SuperblockSize)) // shrink: 13 superblocks back
	if h.LastAddr != a {
		t.Fatal("a shrink moved it")
	}
	blocker := alloc(t, h, c, 64) // the superblock right after it
	if blocker != a+3*spec.SuperblockSize {
		t.Fatalf("the small object is not right after the large one (%#x, %#x)", a, blocker)
	}
	must(t, h.Realloc(c, a, 5*spec.SuperblockSize))
	if h.LastAddr == a {
		t.Fatal("it grew in place over a superblock in use")
	}
	must(t, h.FreeAll())
}

// TestReallocForeignRefusedFirst (FREE-INVALID): a Realloc of a slice that
// is not in the reservation (the Go heap, another Allocator) is refused as
// its free is, ErrInvalidPointer, before it allocates anything (review25: it
// allocated first, so a full reservation said ErrOutOfMemory and counted no
// invalid free, and in guard mode the new object it freed again went to the
// quarantine, pushing a freed object out of it).
func TestReallocForeignRefusedFirst(t *testing.T) {
	other, err := impl.New(impl.Options{Reserve: 4 * spec.SuperblockSize})
	must(t, err)
	defer other.Close()
	foreign, err := other.Alloc(100)
	must(t, err)
	a, err := impl.New(impl.Options{Reserve: 8 * spec.SuperblockSize,
		Guard: impl.GuardOptions{Enabled: true, SampleRate: 1, QuarantineObjects: 1}})
	must(t, err)
	defer a.Close()
	c, _ := a.NewCache()
	x, err := c.Alloc(100)
	must(t, err)
	must(t, c.Free(x)) // quarantined; the bound is one object
	for _, n := range []int{100, 100_000} {
		for _, b := range [][]byte{make([]byte, 100), foreign} {
			if _, err := c.Realloc(b, n); !errors.Is(err, impl.ErrInvalidPointer) {
				t.Fatalf("Cache.Realloc(foreign, %d): %v, want ErrInvalidPointer", n, err)
			}
			if _, err := a.Realloc(b, n); !errors.Is(err, impl.ErrInvalidPointer) {
				t.Fatalf("Allocator.Realloc(foreign, %d): %v, want ErrInvalidPointer", n, err)
			}
		}
	}
	if s := a.Stats(); s.InvalidFrees != 8 || s.Guard.Released != 0 || s.Guard.Allocs != 1 || s.Large.Allocs != 0 {
		t.Fatalf("after 8 refused Reallocs: %d invalid frees, %d guarded allocations, %d large, %d released from the quarantine",
			s.InvalidFrees, s.Guard.Allocs, s.Large.Allocs, s.Guard.Released)
	}
	// A full reservation does not change the answer.
	var keep [][]byte
	for {
		b, err := c.Alloc(100_000)
		if err != nil {
			break
		}
		keep = append(keep, b)
	}
	if _, err := c.Realloc(foreign, 100_000); !errors.Is(err, impl.ErrInvalidPointer) {
		t.Fatalf("Realloc(foreign) at out of memory: %v, want ErrInvalidPointer", err)
	}
	for _, b := range keep {
		must(t, c.Free(b))
	}
	must(t, other.Free(foreign))
}
