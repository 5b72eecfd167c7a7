package invariants

import (
	"slices"
	"testing"
	"time"

	"github.com/refalloc/refalloc/impl"
	"github.com/refalloc/refalloc/spec"
)

// TestBadWildReachesEverySlot (FREE-DOUBLE, FREE-INVALID): the harness's
// wild frees reach every 8-byte boundary of a superblock, and so the odd
// slots of the 8-byte class, the only class whose size is not a multiple of
// 16. A stride of 16 (adv14c's slip 26) reaches none of them, and a bug that
// judged a free there wrongly would go unseen by every machine. Then one
// such wild free, of a free odd slot of an 8-byte superblock, is made and
// judged by the oracle as a double free.
func TestBadWildReachesEverySlot(t *testing.T) {
	h, err := NewHarness(impl.Options{Reserve: 16 * spec.SuperblockSize})
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	id, err := h.NewCache()
	if err != nil {
		t.Fatal(err)
	}
	if err := h.Alloc(id, 8, 1); err != nil {
		t.Fatal(err)
	}
	live := h.Live()[0]
	seen := map[uintptr]int{} // offset in the superblock: a pick reaching it
	for pick := range 2 * spec.SuperblockSize / 8 {
		b, done, err := h.badSlice(BadWild, pick)
		if err == errNone {
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		seen[(addr(b)-h.M.Base())%spec.SuperblockSize] = pick
		done()
	}
	liveOff := (live - h.M.Base()) % spec.SuperblockSize
	for off := uintptr(0); off < spec.SuperblockSize; off += 8 {
		if _, ok := seen[off]; !ok && off != liveOff {
			t.Fatalf("no wild free reaches offset %#x of a superblock (of %d reached)", off, len(seen))
		}
	}
	// A free odd slot of the live object's superblock (class 8).
	off := liveOff + 8
	if off%16 != 8 {
		off = liveOff + 24
	}
	want := h.M.Live()
	if err := h.FreeBad(id, BadWild, seen[off]); err != nil {
		t.Fatalf("a wild free of the free odd slot at offset %#x: %v", off, err)
	}
	if got := h.M.Live(); len(got) != len(want) || got[0].Addr != live {
		t.Fatalf("a wild free of a free slot changed the live objects: %v, want %v", got, want)
	}
	if s := h.A.Stats(); s.DoubleFrees != 1 {
		t.Fatalf("a wild free of a free odd slot of the 8-byte class: %d double frees counted, want 1", s.DoubleFrees)
	}
}

// TestRefusalDiffExcusesOnlyTheTimer (FREE-INVALID, MEM-ACCOUNT): a refused
// free changes no state, but the decay timer runs on its own goroutine and
// may return a pooled superblock to the OS between the two snapshots around
// it (TestMachine once blamed the refusal for that). RefusalDiff excuses
// exactly that, and only when the snapshots show that the timer fired: a
// pooled superblock going from dirty to fresh. The same change without a
// firing, or to a superblock in use, or the other way round, is still a
// change.
func TestRefusalDiffExcusesOnlyTheTimer(t *testing.T) {
	a, err := impl.New(impl.Options{Reserve: 16 * spec.SuperblockSize, Retain: -1, Decay: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	c, err := a.NewCache()
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	x, err := c.Alloc(spec.MaxSmall + 1) // a large object: freed, its superblocks are pooled dirty
	if err != nil {
		t.Fatal(err)
	}
	y, err := c.Alloc(64) // a small superblock in use
	if err != nil {
		t.Fatal(err)
	}
	defer c.Free(y)
	if err := c.Free(x); err != nil {
		t.Fatal(err)
	}
	before := a.Snapshot()
	pooled, inUse := -1, -1
	for i, st := range before.Superblocks {
		switch {
		case st.State == impl.SBPool && st.Dirty && pooled < 0:
			pooled = i
		case st.State == impl.SBSmall:
			inUse = i
		}
	}
	if pooled < 0 || inUse < 0 {
		t.Fatalf("setup: no dirty pooled superblock (%d) or small one (%d)", pooled, inUse)
	}
	if d := RefusalDiff(before, a.Snapshot()); d != "" {
		t.Fatalf("two snapshots with nothing between them differ:\n%s", d)
	}
	changed := func(i int, fired bool, f func(*impl.SuperblockState)) *impl.Snapshot {
		s := *before
		s.Superblocks = slices.Clone(before.Superblocks)
		f(&s.Superblocks[i])
		if fired {
			s.TimerFired++
		}
		return &s
	}
	decommit := func(st *impl.SuperblockState) { st.Dirty, st.PooledAt = false, 0 }
	if d := RefusalDiff(before, changed(pooled, true, decommit)); d != "" {
		t.Errorf("the timer fired and returned a pooled superblock to the OS; RefusalDiff blames the refusal:\n%s", d)
	}
	for _, bad := range []struct {
		what  string
		after *impl.Snapshot
	}{
		{"a pooled superblock returned to the OS without the timer", changed(pooled, false, decommit)},
		{"a superblock in use made fresh while the timer fired", changed(inUse, true, decommit)},
		{"a pooled superblock's PooledAt moved while the timer fired", changed(pooled, true, func(st *impl.SuperblockState) { st.PooledAt++ })},
		{"a pooled superblock's class changed while the timer fired", changed(pooled, true, func(st *impl.SuperblockState) { st.Dirty, st.Class = false, 3 })},
	} {
		if RefusalDiff(before, bad.after) == "" {
			t.Errorf("%s: RefusalDiff finds no change", bad.what)
		}
	}
}
