package impl_test

// Tests of hunt17, a mechanical mutation sweep (relational flips, && and ||,
// negated conditions, literals off by one, + and -, dropped statements,
// booleans made constant) over impl/cache.go, sbcache.go, stats.go and
// leaks.go. Each names its rule and the slip it kills.

import (
	"errors"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"testing"
	"unsafe"

	"github.com/refalloc/refalloc/impl"
	"github.com/refalloc/refalloc/spec"
)

// TestFrontFreeInUntouchedChunk (FREE-INVALID): headers are made 512
// superblocks at a time, so in a reservation of 513 superblocks the last one
// has no header until it is used. Allocator.Free of its start, on the per-P
// front (one P), misses the superblock cache and looks the header up
// lock-free (Cache.fillPinned), finds none, and leaves the free to the slow
// path, which says ErrInvalidPointer. Slip: fillPinned does not check that
// the lookup found a header (pinnednilheader): it reads the remote set of a
// nil header, pinned, and the process dies of the fault (so the free runs in
// a child process, as in TestFrontFreeOnePastReservation).
func TestFrontFreeInUntouchedChunk(t *testing.T) {
	if os.Getenv("REFALLOC_UNTOUCHED_CHILD") == "" { // a fault while pinned kills the process: run it in a child
		cmd := exec.Command(os.Args[0], "-test.run=^TestFrontFreeInUntouchedChunk$")
		cmd.Env = append(os.Environ(), "REFALLOC_UNTOUCHED_CHILD=1")
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("Allocator.Free in a chunk of headers never made, in a child process: %v\n%s", err, out)
		}
		return
	}
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1)) // one P: the free is the pinned path's
	const nsb = 513
	a, err := impl.New(impl.Options{Reserve: nsb * spec.SuperblockSize})
	must(t, err)
	defer a.Close()
	first, err := a.Alloc(8)
	must(t, err)
	s := a.Snapshot()
	last := s.Base + (nsb-1)*spec.SuperblockSize
	if last+spec.SuperblockSize != s.Base+s.Size {
		t.Fatalf("setup: the reservation is %d bytes, want %d superblocks", s.Size, nsb)
	}
	b := unsafe.Slice((*byte)(unsafe.Add(unsafe.Pointer(unsafe.SliceData(first)), last-addrOf(first))), 8)
	ferr := a.Free(b)
	if !errors.Is(ferr, impl.ErrInvalidPointer) {
		t.Fatalf("Allocator.Free of the start of superblock %d, never used: %v, want ErrInvalidPointer", nsb-1, ferr)
	}
	must(t, a.Free(first))
}

// TestPartialFromMidListThenCurrent (LIFECYCLE): a superblock unlinked from
// the middle of its owner's full list forgets its neighbours. Cache c fills
// four superblocks of a class and starts a fifth: acquire orphans each full
// one; c frees one object into each of the first three, adopting them back
// onto its full list (S3, S2, S1), then frees partialMin-1 more of S2, which
// moves it, from the middle of the full list, to the partial list; the
// refill after S5 runs out makes S2 current. Close then orphans every
// superblock c owns: all five. Slip: unlink leaves the superblock's prev and
// next as they were (unlinkkeepslinks): S2 goes to the partial list's head
// still pointing back at S3, and its unlink as it becomes current cuts S1 off
// the full list (S3.next = nil) and leaves S2 at the partial list's head;
// Close never reaches S1, which stays c's, a closed cache's, for good.
func TestPartialFromMidListThenCurrent(t *testing.T) {
	const size = 1000
	k := spec.SizeToClass(size)
	n := spec.ClassObjects(k)
	pm := max(1, n/16) // partialMin
	if pm < 2 {
		t.Fatalf("setup: class %d has %d objects, partialMin %d: want one above 1", k, n, pm)
	}
	a, err := impl.New(impl.Options{Reserve: 16 * spec.SuperblockSize})
	must(t, err)
	defer a.Close()
	c, _ := a.NewCache()
	objs := allocObjects(t, c, size, 4*n+1) // S1..S4 full (orphans), S5 current
	sb := make([]int, 5)
	for j := range sb {
		sb[j] = sbOf(a, objs[j*n])
	}
	for j := range 3 {
		if !sbState(t, a, sb[j]).Orphan {
			t.Fatalf("setup: S%d not an orphan", j+1)
		}
		must(t, c.Free(objs[j*n])) // adopts it onto c's full list
	}
	for i := 1; i < pm; i++ {
		must(t, c.Free(objs[n+i])) // S2 reaches partialMin: partial
	}
	if st := sbState(t, a, sb[1]); st.List != "partial" || st.Owner < 0 {
		t.Fatalf("setup: S2 on %q, owner %d; want c's partial list", st.List, st.Owner)
	}
	more := allocObjects(t, c, size, n) // the rest of S5, then S2's first free object
	if st := sbState(t, a, sb[1]); !st.Current {
		t.Fatalf("setup: S2 on %q, want current", st.List)
	}
	must(t, c.Close())
	for j, i := range sb {
		if st := sbState(t, a, i); !st.Orphan || st.Owner != -1 {
			t.Fatalf("after Close: S%d (superblock %d) on %q, owner %d; want every superblock of the closed cache an orphan", j+1, i, st.List, st.Owner)
		}
	}
	if got := a.Stats().OrphanedSuperblocks; got != len(sb) {
		t.Fatalf("after Close: %d orphaned superblocks, want %d", got, len(sb))
	}
	freed := map[int]bool{0: true, n: true, 2 * n: true}
	for i := 1; i < pm; i++ {
		freed[n+i] = true
	}
	d, _ := a.NewCache()
	for i, b := range objs {
		if !freed[i] {
			must(t, d.Free(b))
		}
	}
	for _, b := range more {
		must(t, d.Free(b))
	}
	must(t, d.Close())
}

// TestInvalidFreeErrorNamesAddress (FREE-INVALID): the FreeError of a free
// refused by the header lookup of a miss names the address freed: one in
// the Go heap, outside the reservation; one in a superblock never used
// (headers are made 512 at a time: in a reservation of 513 superblocks the
// last has none); and one in a superblock whose header exists but was never
// used; and, the class being unknown, Class -1. Slip: freeMiss computes
// the address as base-off (missaddr), and the error names another address.
func TestInvalidFreeErrorNamesAddress(t *testing.T) {
	const nsb = 513
	a, err := impl.New(impl.Options{Reserve: nsb * spec.SuperblockSize})
	must(t, err)
	defer a.Close()
	c, _ := a.NewCache()
	defer c.Close()
	first := allocN(t, c, 8)
	s := a.Snapshot()
	at := func(addr uintptr) []byte {
		return unsafe.Slice((*byte)(unsafe.Add(unsafe.Pointer(unsafe.SliceData(first)), addr-addrOf(first))), 8)
	}
	cases := []struct {
		name string
		b    []byte
	}{
		{"Go heap", make([]byte, 8)},
		{"no header", at(s.Base + (nsb-1)*spec.SuperblockSize)},
		{"unused header", at(s.Base + (nsb-2)*spec.SuperblockSize)},
	}
	for _, tc := range cases {
		var fe *impl.FreeError
		if err := c.Free(tc.b); !errors.As(err, &fe) || !errors.Is(err, impl.ErrInvalidPointer) || fe.Addr != addrOf(tc.b) || fe.Class != -1 {
			t.Errorf("%s: Free(%#x): %v (%+v), want ErrInvalidPointer naming %#x, class -1 (unknown)", tc.name, addrOf(tc.b), err, fe, addrOf(tc.b))
		}
	}
	must(t, c.Free(first))
}

// TestStatsStringBadFreesLine (FREE-DOUBLE, FREE-INVALID: Stats counts every
// bad free): Stats.String prints the bad frees and writes after free. Slip:
// String leaves that line out (found by the sweep; no mutant switch).
func TestStatsStringBadFreesLine(t *testing.T) {
	s := impl.Stats{DoubleFrees: 2, InvalidFrees: 3, WriteAfterFrees: 4}
	if want := "bad frees: 2 double, 3 invalid; writes after free: 4\n"; !strings.Contains(s.String(), want) {
		t.Fatalf("Stats.String():\n%s\nwant the line %q", s.String(), want)
	}
}

// TestAllocNegativeSizeText (ALIGN: Alloc(n) is AllocAligned(n, 1)): the
// error of Alloc(-5) names size -5 and alignment 1. Slip: Alloc passes
// another alignment to its slow path (found by the sweep; no mutant switch).
func TestAllocNegativeSizeText(t *testing.T) {
	a, err := impl.New(impl.Options{Reserve: 4 * spec.SuperblockSize})
	must(t, err)
	defer a.Close()
	c, _ := a.NewCache()
	defer c.Close()
	if _, err := c.Alloc(-5); !errors.Is(err, impl.ErrInvalidSize) || !strings.Contains(err.Error(), "size -5, alignment 1") {
		t.Fatalf("Alloc(-5): %v, want ErrInvalidSize naming size -5, alignment 1", err)
	}
}

// helperT records whether Helper was called before Errorf.
type helperT struct{ helper, errorf bool }

func (h *helperT) Helper() {
	if !h.errorf {
		h.helper = true
	}
}
func (h *helperT) Errorf(string, ...any) { h.errorf = true }

// TestCheckLeaksIsHelper (EMPTY, CheckLeaks): CheckLeaks marks itself a
// helper before it reports, so a leak is reported at the caller's line.
// Slip: CheckLeaks does not call t.Helper (found by the sweep; no mutant
// switch).
func TestCheckLeaksIsHelper(t *testing.T) {
	a, err := impl.New(impl.Options{Reserve: 4 * spec.SuperblockSize})
	must(t, err)
	defer a.Close()
	b, err := a.Alloc(8)
	must(t, err)
	var h helperT
	impl.CheckLeaks(&h, a)
	if !h.errorf || !h.helper {
		t.Fatalf("CheckLeaks of a leak: reported %v, called Helper first %v; want both", h.errorf, h.helper)
	}
	must(t, a.Free(b))
}
