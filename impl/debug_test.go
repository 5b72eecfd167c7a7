package impl_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/refalloc/refalloc/impl"
	"github.com/refalloc/refalloc/spec"
)

// TestDebugWriteAfterFree (DEBUG-POISON): in debug mode a write into a freed
// object is reported, with its address, the offset and the site that had
// allocated it, when the memory is about to be handed out again: small objects
// freed locally and remotely, and large objects, at every byte position of the
// small object and at the edges (first, last, page and superblock boundaries)
// and a stride of the large one. A remote free writes nothing into the object
// (it may not be live any more by the time the CAS lands): its owner poisons it
// when it collects the free.
func TestDebugWriteAfterFree(t *testing.T) {
	for _, tc := range []struct {
		name   string
		size   int
		remote bool
	}{{"small, local", 2000, false}, {"small, remote", 2000, true}, {"large", 100_000, false}, {"large, remote", 100_000, true}} {
		t.Run(tc.name, func(t *testing.T) {
			var reports []error
			a, err := impl.New(impl.Options{Reserve: 32 * spec.SuperblockSize, Debug: true, Retain: 16 * spec.SuperblockSize,
				OnError: func(err error) { reports = append(reports, err) }})
			must(t, err)
			defer a.Close()
			c, _ := a.NewCache()
			d, _ := a.NewCache()
			// The first object is kept (Close reports it): the one under test is
			// the next, and one group of 32 (class 2048) keeps refills on it.
			usable := cap(allocHere(t, c, tc.size))
			var positions []int
			if usable <= spec.MaxSmall {
				for i := range usable {
					positions = append(positions, i)
				}
			} else {
				positions = []int{0, 1, spec.PageSize - 1, spec.PageSize, spec.SuperblockSize - 1, spec.SuperblockSize, usable - 1}
				for i := 7; i < usable; i += 9973 {
					positions = append(positions, i)
				}
			}
			var site []byte
			for n, pos := range positions {
				b := allocHere(t, c, tc.size)
				if site != nil && addrOf(b) != addrOf(site) {
					t.Fatalf("position %d: the slot was not reused (%#x, then %#x)", pos, addrOf(site), addrOf(b))
				}
				site = b
				for i := range b[:cap(b)] {
					b[:cap(b)][i] = 0x11
				}
				if tc.remote {
					must(t, d.Free(b))
					if tc.size <= spec.MaxSmall && b[:cap(b)][pos] != 0x11 {
						t.Fatalf("a remote free wrote %#x at byte %d before its owner collected it", b[:cap(b)][pos], pos)
					}
					c.Flush() // the owner collects, and poisons
				} else {
					must(t, c.Free(b))
				}
				for i, x := range b[:cap(b)] {
					if x != impl.Poison {
						t.Fatalf("freed memory holds %#x at byte %d, not the poison", x, i)
					}
				}
				b[:cap(b)][pos] = 42 // the bug: a write after free
				c.Flush()
				d.Flush()
				again, err := c.Alloc(tc.size)
				must(t, err)
				if addrOf(again) != addrOf(b) {
					t.Fatalf("position %d: the slot was not reused (%#x, then %#x)", pos, addrOf(b), addrOf(again))
				}
				var waf *impl.WriteAfterFreeError
				if len(reports) != n+1 || !errors.As(reports[n], &waf) || !errors.Is(reports[n], impl.ErrWriteAfterFree) {
					t.Fatalf("position %d: reports: %v", pos, reports)
				}
				if waf.Addr != addrOf(b) || waf.Offset != pos || waf.Size != usable || !strings.Contains(waf.Site, "allocHere") {
					t.Fatalf("position %d: report %+v does not name the object, the byte and the allocation site", pos, waf)
				}
				if got := a.Stats().WriteAfterFrees; got != uint64(n+1) {
					t.Fatalf("position %d: Stats.WriteAfterFrees = %d, want %d", pos, got, n+1)
				}
				for i, x := range again[:cap(again)] {
					if x != 0 {
						t.Fatalf("position %d: the object handed out again holds %#x at byte %d", pos, x, i)
					}
				}
				must(t, c.Free(again))
				c.Flush() // the next refill starts from the lowest free slot again
			}
		})
	}
}

//go:noinline
func allocHere(t *testing.T, c *impl.Cache, n int) []byte {
	b, err := c.Alloc(n)
	must(t, err)
	return b
}

type fakeT struct{ errs []string }

func (f *fakeT) Helper() {}
func (f *fakeT) Errorf(format string, args ...any) {
	f.errs = append(f.errs, fmt.Sprintf(format, args...))
}

// TestLeaks: Leaks lists live objects (with sites in debug mode), not what caches
// hold; CheckLeaks fails a test that leaves objects live.
func TestLeaks(t *testing.T) {
	for _, debug := range []bool{false, true} {
		a, err := impl.New(impl.Options{Reserve: 32 * spec.SuperblockSize, Debug: debug})
		must(t, err)
		c, _ := a.NewCache()
		kept := allocHere(t, c, 48)
		big := allocHere(t, c, 70_000)
		for range 10 {
			b, _ := c.Alloc(48)
			must(t, c.Free(b))
		}
		leaks := a.Leaks()
		if len(leaks) != 2 || leaks[0].Addr != addrOf(kept) && leaks[1].Addr != addrOf(kept) {
			t.Fatalf("debug %v: leaks %v", debug, leaks)
		}
		for _, l := range leaks {
			if debug != strings.Contains(l.Site, "allocHere") {
				t.Fatalf("debug %v: site %q", debug, l.Site)
			}
		}
		var f fakeT
		impl.CheckLeaks(&f, a)
		if len(f.errs) != 1 || !strings.Contains(f.errs[0], "2 objects leaked") {
			t.Fatalf("CheckLeaks: %q", f.errs)
		}
		must(t, c.Free(kept))
		must(t, c.Free(big))
		f = fakeT{}
		impl.CheckLeaks(&f, a)
		if len(f.errs) != 0 {
			t.Fatalf("CheckLeaks after freeing everything: %q", f.errs)
		}
		must(t, a.Close())
	}
}
