package impl_test

import (
	"errors"
	"runtime/debug"
	"strings"
	"testing"

	"github.com/refalloc/refalloc/impl"
	"github.com/refalloc/refalloc/spec"
)

// TestStatsStringNamesEachCount (LARGE-EXACT, STATS-LEAD: Stats.String is the
// table those rules are read from): every count is printed next to its own
// name, so a reader of the table is not told allocs for frees or orphaned
// superblocks for small ones. The values are distinct so that any two swapped
// show. Slips: the large line or the memory line prints two counts in each
// other's place.
func TestStatsStringNamesEachCount(t *testing.T) {
	s := impl.Stats{
		Large:    impl.LargeStats{Allocs: 11, Frees: 7, LiveObjects: 4, LiveBytes: 4096},
		Reserved: 1 << 30, Committed: 3 << 20, InUse: 2 << 20,
		SmallSuperblocks: 9, LargeSuperblocks: 5, OrphanedSuperblocks: 2,
	}
	out := s.String()
	for _, want := range []string{
		"large: 11 allocs, 7 frees, 4 live (4096 bytes)\n",
		"memory: 1073741824 reserved, 3145728 committed, 2097152 in use; superblocks: 9 small (2 orphaned), 5 large\n",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("Stats.String has no line %q:\n%s", want, out)
		}
	}
}

// TestGuardQuarantineBytesUpToMaxAlloc (GUARD-FAULT): QuarantineBytes is
// accepted in [0, spec.MaxAlloc], the range its error names, the bound
// itself included. Slip: the upper check is exclusive.
func TestGuardQuarantineBytesUpToMaxAlloc(t *testing.T) {
	a, err := impl.New(impl.Options{Reserve: 16 * spec.SuperblockSize, Guard: impl.GuardOptions{Enabled: true, QuarantineBytes: spec.MaxAlloc}})
	if err != nil {
		t.Fatalf("QuarantineBytes %d refused: %v", spec.MaxAlloc, err)
	}
	defer a.Close()
	if g := a.Snapshot().Guard; g.QuarantineBytes != spec.MaxAlloc {
		t.Errorf("QuarantineBytes %d, want %d", g.QuarantineBytes, spec.MaxAlloc)
	}
}

// TestCatchFaultsRestoresPanicOnFault (GUARD-FAULT): the function CatchFaults
// returns puts back the SetPanicOnFault setting it found, whatever it was, so
// a goroutine that caught no fault is left as it was. Slip: it restores the
// opposite of the old setting, or leaves the flag set.
func TestCatchFaultsRestoresPanicOnFault(t *testing.T) {
	a := newGuarded(t, impl.GuardOptions{})
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(false))
	for _, old := range []bool{false, true} {
		debug.SetPanicOnFault(old)
		func() {
			defer a.CatchFaults(nil)()
		}()
		if got := debug.SetPanicOnFault(false); got != old {
			t.Errorf("SetPanicOnFault was %v before CatchFaults, %v after", old, got)
		}
	}
}

// TestSnapshotRetainInBytes (MEM-ACCOUNT): Snapshot.Retain is in bytes, as
// Options.Retain is, since the invariant checker compares it with the bytes
// of dirty pooled superblocks; in superblocks it would flag a pool within its
// bound. Slip: the snapshot copies the count of superblocks.
func TestSnapshotRetainInBytes(t *testing.T) {
	for _, tc := range []struct{ opt, want int }{{3 * spec.SuperblockSize, 3 * spec.SuperblockSize}, {0, 32 << 20}, {-1, 0}} {
		a, err := impl.New(impl.Options{Reserve: 16 * spec.SuperblockSize, Retain: tc.opt})
		must(t, err)
		if got := a.Snapshot().Retain; got != tc.want {
			t.Errorf("Options.Retain %d: Snapshot.Retain %d, want %d", tc.opt, got, tc.want)
		}
		a.Close()
	}
}

//go:noinline
func allocFirstHere(t *testing.T, c *impl.Cache, n int) []byte {
	b, err := c.Alloc(n)
	must(t, err)
	return b
}

//go:noinline
func allocRestHere(t *testing.T, c *impl.Cache, n int) []byte {
	b, err := c.Alloc(n)
	must(t, err)
	return b
}

// TestDebugReleaseReportsObjectsSite (DEBUG-POISON: the report names "the
// site that had allocated it"): a write after free found as the emptied
// superblock is released names the stack that allocated the written object,
// not another object's of the superblock. Slip: the release verifies every
// object against the first object's site.
func TestDebugReleaseReportsObjectsSite(t *testing.T) {
	const size = 3936
	k := spec.SizeToClass(size)
	n := spec.ClassObjects(k)
	var reports []error
	a := newDebugReporting(t, &reports)
	c, _ := a.NewCache()
	first := allocFirstHere(t, c, size)
	if off := addrOf(first) & (spec.SuperblockSize - 1); off != 0 {
		t.Fatalf("the first object of a fresh superblock is at offset %d", off)
	}
	objs := [][]byte{first}
	for range n - 1 {
		objs = append(objs, allocRestHere(t, c, size))
	}
	for _, b := range objs {
		must(t, c.Free(b))
	}
	written := objs[1]
	written[:cap(written)][5] = 0x5a
	must(t, c.Close()) // releases the empty superblock
	var waf *impl.WriteAfterFreeError
	if len(reports) != 1 || !errors.As(reports[0], &waf) || waf.Addr != addrOf(written) {
		t.Fatalf("reports %v, want one write after free of the object at %#x", reports, addrOf(written))
	}
	if !strings.Contains(waf.Site, "allocRestHere") || strings.Contains(waf.Site, "allocFirstHere") {
		t.Errorf("the report names the allocation site\n%s\nwant allocRestHere's", waf.Site)
	}
}

// TestGuardHeapBackendDebugReportsUsableSize (GUARD-FAULT, DEBUG-POISON):
// under the Go-heap backend in debug mode guard mode poisons a quarantined
// object's whole superblock, but a write after free found at its release
// still reports the object's usable size, not the bytes verified. Slip: the
// report's Size is the length poisoned (equal to the usable size outside
// debug mode, so TestGuardHeapBackend cannot tell).
func TestGuardHeapBackendDebugReportsUsableSize(t *testing.T) {
	var reports []error
	a, err := impl.New(impl.Options{Reserve: 64 * spec.SuperblockSize, HeapBackend: true, Debug: true, OnError: func(err error) { reports = append(reports, err) },
		Guard: impl.GuardOptions{Enabled: true, SampleRate: 1, QuarantineObjects: 1}})
	must(t, err)
	defer a.Close()
	c, _ := a.NewCache()
	defer c.Close()
	b, err := c.Alloc(100)
	must(t, err)
	must(t, c.Free(b))
	b[3] = 1 // a write after free: the Go heap does not fault
	o, err := c.Alloc(100)
	must(t, err)
	must(t, c.Free(o)) // pushes b out of the quarantine
	var waf *impl.WriteAfterFreeError
	if len(reports) != 1 || !errors.As(reports[0], &waf) || waf.Addr != addrOf(b) || waf.Offset != 3 {
		t.Fatalf("reports %v, want the write at byte 3 of %#x", reports, addrOf(b))
	}
	if waf.Size != cap(b) {
		t.Errorf("the report's Size is %d, want the object's usable %d", waf.Size, cap(b))
	}
}
