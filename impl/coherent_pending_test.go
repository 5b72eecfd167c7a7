package impl_test

import (
	"testing"

	"github.com/refalloc/refalloc/impl"
	"github.com/refalloc/refalloc/spec"
)

// TestStaleEntryPendingBitOfNextLayout (CACHE-COHERENT: an entry that may be
// stale decides nothing; FREE-DOUBLE is judged by the header's layout): a
// remote free through an entry of a superblock's last small period, whose
// bit in the new period's remote word is pending for another object, must
// not be refused as a double free: the tag says the entry is stale, and the
// header's layout makes the address a live object. Slip: remoteFree tests
// the pending bit before the tag, so a stale entry's free reports
// remotePending, which freeRemote takes for a repeated remote free.
func TestStaleEntryPendingBitOfNextLayout(t *testing.T) {
	small, big := spec.SizeToClass(16), spec.SizeToClass(32)
	if spec.ClassSize(small) != 16 || spec.ClassSize(big) != 32 {
		t.Skip("needs classes of 16 and 32 bytes")
	}
	a, err := impl.New(impl.Options{Reserve: 64 * spec.SuperblockSize, OnError: func(err error) { t.Error(err) }})
	must(t, err)
	defer a.Close()
	owner, _ := a.NewCache()
	stale, _ := a.NewCache()
	other, _ := a.NewCache()

	// Period 1, 16 bytes: stale frees one object remotely and keeps its entry.
	var xs [][]byte
	for range 4 {
		b, err := owner.Alloc(16)
		must(t, err)
		xs = append(xs, b)
	}
	must(t, stale.Free(xs[3]))
	for _, b := range xs[:3] {
		must(t, owner.Free(b))
	}
	owner.Flush() // collects stale's free: empty, released

	// Period 2, the same superblock carved for 32 bytes.
	var ys [][]byte
	for range 3 {
		b, err := owner.Alloc(32)
		must(t, err)
		ys = append(ys, b)
	}
	if addrOf(ys[0]) != addrOf(xs[0]) || addrOf(ys[1]) != addrOf(xs[0])+32 {
		t.Fatalf("the 32-byte objects are at %#x, %#x, not where the 16-byte superblock was (%#x)", addrOf(ys[0]), addrOf(ys[1]), addrOf(xs[0]))
	}
	// Object 2 of the new layout gets a remote free, pending: bit 2 of word 0,
	// the bit of offset 32 in stale's 16-byte entry.
	must(t, other.Free(ys[2]))
	if err := stale.Free(ys[1]); err != nil {
		t.Fatalf("a live object freed through a stale entry whose bit is pending in the new period: %v", err)
	}
	must(t, owner.Free(ys[0]))
	owner.Flush()
	if s := a.Stats(); s.DoubleFrees != 0 || s.Classes[big].Allocs != s.Classes[big].Frees {
		t.Fatalf("%d double frees; class %d: %d allocs, %d frees after all were freed", s.DoubleFrees, big, s.Classes[big].Allocs, s.Classes[big].Frees)
	}
	for _, c := range []*impl.Cache{owner, stale, other} {
		must(t, c.Close())
	}
}
