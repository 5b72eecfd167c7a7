// Leak checks: the live objects of an Allocator, for users' tests.

package impl

import (
	"fmt"
	"math/bits"
	"strings"

	"github.com/refalloc/refalloc/internal/mutant"
	"github.com/refalloc/refalloc/spec"
)

// Leak is a live object.
type Leak struct {
	Addr  uintptr
	Size  int    // usable bytes
	Class int    // size class, or spec.Large
	Site  string // where it was allocated (debug mode only)
}

func (l Leak) String() string {
	s := fmt.Sprintf("%d-byte object at %#x", l.Size, l.Addr)
	if l.Site != "" {
		s += ", allocated at\n" + l.Site
	}
	return s
}

// Leaks lists the live objects: allocated and not freed (objects caches hold
// for later are not live). In debug mode each comes with its allocation site,
// and in guard mode each guarded one.
// Call it at a quiescent point, like Snapshot.
// After Close it lists what was live at Close (EMPTY): Close marks every
// remote word pending (markAllPending), which would hide every small object.
func (a *Allocator) Leaks() []Leak {
	if a.closed.Load() && !mutant.LeaksAfterClose {
		if l := a.atClose; l != nil {
			return a.leaksOf(l.s, l.held)
		}
		return nil
	}
	return a.leaksOf(a.snapshot(), heldGroups(a.openCaches()))
}

// liveAtClose is the state Leaks lists after Close: a snapshot taken before
// the remote words were marked, and a copy of the held groups then, which
// holds nothing of the caches.
type liveAtClose struct {
	s    *Snapshot
	held map[*superblock]heldGroup
}

func (a *Allocator) leaksOf(s *Snapshot, held map[*superblock]heldGroup) []Leak {
	var out []Leak
	a.lock()
	defer a.mu.Unlock()
	for _, st := range s.Superblocks {
		sb := a.lookup(uintptr(st.Index))
		switch st.State {
		case SBLargeHead:
			k := spec.Large
			if mutant.LeakLargeClass { // EMPTY: a large leak's class is -1
				k = -1
			}
			size := int(sb.usable)
			if mutant.LeakLargeSize { // EMPTY: Leak.Size is usable bytes
				size = int(sb.runLen)
			}
			out = append(out, Leak{Addr: st.Addr, Size: size, Class: k, Site: a.sites.format(sb.site)})
		case SBGuard:
			k := st.Class
			if mutant.LeakGuardClass { // EMPTY: a guarded leak named large
				k = spec.Large
			}
			out = append(out, Leak{Addr: st.Addr, Size: int(sb.usable), Class: k, Site: a.sites.format(sb.site)})
		case SBSmall:
			size := spec.ClassSize(st.Class)
			for g := range st.Free {
				h := held[sb]
				if mutant.LeaksHeld {
					h = heldGroup{}
				}
				for live := liveBits(&st, h, g); live != 0; live &= live - 1 {
					idx := 32*g + bits.TrailingZeros32(live)
					l := Leak{Addr: st.Addr + uintptr(idx*size), Size: size, Class: st.Class}
					if sb.sites != nil {
						site := sb.sites[idx]
						if mutant.LeakSiteGroup {
							site = sb.sites[g]
						}
						l.Site = a.sites.format(site)
					}
					out = append(out, l)
				}
			}
		}
	}
	return out
}

// TestingT is the part of testing.TB that CheckLeaks uses.
type TestingT interface {
	Helper()
	Errorf(format string, args ...any)
}

// CheckLeaks fails t if a has live objects, listing them (with their
// allocation sites in debug mode). Use it as a test's cleanup:
//
//	t.Cleanup(func() { impl.CheckLeaks(t, a) })
func CheckLeaks(t TestingT, a *Allocator) {
	t.Helper()
	leaks := a.Leaks()
	if len(leaks) == 0 {
		return
	}
	var b strings.Builder
	for i, l := range leaks {
		if i == 10 {
			fmt.Fprintf(&b, "... and %d more\n", len(leaks)-i)
			if !mutant.LeaksNoBreak {
				break
			}
		}
		fmt.Fprintf(&b, "%s\n", l)
	}
	t.Errorf("refalloc: %d objects leaked:\n%s", len(leaks), b.String())
}
