package invariants

import (
	"testing"

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
