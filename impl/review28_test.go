package impl_test

import (
	"errors"
	"testing"

	"github.com/refalloc/refalloc/impl"
	"github.com/refalloc/refalloc/spec"
)

// TestDebugWAFPastNewObjectsCapReported (DEBUG-POISON): memory that held data
// is verified before it is handed out again or re-poisoned. A freed large
// object written after its free, whose superblocks a smaller large object
// then takes (a new one, or one growing in place), must have the write
// reported even when it lies past the new object's capacity in one of the
// superblocks the new object took: that object's free re-poisons its whole
// run, so a write not verified as the run is taken is never reported
// (review28).
func TestDebugWAFPastNewObjectsCapReported(t *testing.T) {
	const sb = spec.SuperblockSize
	for _, grow := range []bool{false, true} {
		var reports []error
		a, err := impl.New(impl.Options{Reserve: 64 * sb, Debug: true, OnError: func(err error) { reports = append(reports, err) }})
		must(t, err)
		var keep []byte
		if grow {
			keep, err = a.Alloc(100_000) // superblocks 0-1, grown in place below
			must(t, err)
		}
		old, err := a.Alloc(300_000) // 5 superblocks
		must(t, err)
		must(t, a.Free(old))
		// Past 140_000's capacity (143360: three superblocks) but in its third
		// superblock; for the growth, past 300_000's (303104) in the fifth.
		off := 2*sb + 20_000
		if grow {
			off = 2*sb + 50_000
		}
		old[:cap(old)][off] = 'x' // the bug
		var b []byte
		if grow {
			b, err = a.Realloc(keep, 300_000)
			must(t, err)
			if addrOf(b) != addrOf(keep) {
				t.Fatalf("grow: Realloc moved")
			}
		} else {
			b, err = a.Alloc(140_000)
			must(t, err)
			if addrOf(b) != addrOf(old) {
				t.Fatalf("new: Alloc did not reuse the freed run")
			}
		}
		must(t, a.Free(b))
		again, err := a.Alloc(300_000 + 2*sb) // takes the run again: nothing left to find
		must(t, err)
		must(t, a.Free(again))
		var waf *impl.WriteAfterFreeError
		if len(reports) != 1 || !errors.As(reports[0], &waf) || waf.Addr+uintptr(waf.Offset) != addrOf(old)+uintptr(off) {
			t.Errorf("grow=%v: reports %v, want one write after free at %#x", grow, reports, addrOf(old)+uintptr(off))
		}
		if got := a.Stats().WriteAfterFrees; got != 1 {
			t.Errorf("grow=%v: Stats.WriteAfterFrees = %d, want 1", grow, got)
		}
		must(t, a.Close())
	}
}
