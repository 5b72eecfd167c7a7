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
// freed locally and remotely, and large objects.
func TestDebugWriteAfterFree(t *testing.T) {
	for _, tc := range []struct {
		name   string
		size   int
		remote bool
	}{{"small, local", 100, false}, {"small, remote", 100, true}, {"large", 100_000, false}} {
		t.Run(tc.name, func(t *testing.T) {
			var reports []error
			a, err := impl.New(impl.Options{Reserve: 32 * spec.SuperblockSize, Debug: true, Retain: 16 * spec.SuperblockSize,
				OnError: func(err error) { reports = append(reports, err) }})
			must(t, err)
			defer a.Close()
			c, _ := a.NewCache()
			d, _ := a.NewCache()
			b := allocHere(t, c, tc.size)
			if tc.remote {
				must(t, d.Free(b))
			} else {
				must(t, c.Free(b))
			}
			for _, x := range b[:cap(b)] {
				if x != impl.Poison {
					t.Fatalf("freed memory holds %#x, not the poison", x)
				}
			}
			b[:cap(b)][7] = 42 // the bug: a write after free
			c.Flush()
			d.Flush()
			again, err := c.Alloc(tc.size)
			must(t, err)
			if addrOf(again) != addrOf(b) {
				t.Fatalf("the slot was not reused (%#x, then %#x)", addrOf(b), addrOf(again))
			}
			var waf *impl.WriteAfterFreeError
			if len(reports) != 1 || !errors.As(reports[0], &waf) || !errors.Is(reports[0], impl.ErrWriteAfterFree) {
				t.Fatalf("reports: %v", reports)
			}
			if waf.Addr != addrOf(b) || waf.Offset != 7 || !strings.Contains(waf.Site, "allocHere") {
				t.Fatalf("report %+v does not name the object, the byte and the allocation site", waf)
			}
			if a.Stats().WriteAfterFrees != 1 {
				t.Fatalf("Stats.WriteAfterFrees = %d", a.Stats().WriteAfterFrees)
			}
			for _, x := range again[:cap(again)] {
				if x != 0 {
					t.Fatal("the object handed out again is not zeroed")
				}
			}
			must(t, c.Free(again))
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
