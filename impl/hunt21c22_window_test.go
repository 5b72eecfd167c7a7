//go:build refalloc_yield

package impl_test

import (
	"errors"
	"testing"

	"github.com/refalloc/refalloc/impl"
	"github.com/refalloc/refalloc/spec"
)

// TestStaleFreeAdoptsNoPeriodAfterWrap (CACHE-COHERENT, FREE-INVALID): adopt
// takes an orphan only in the period whose header the free read and judged the
// address in, and it names that period by the generation and the remote set:
// the generation alone comes round again after 2^32 periods. A free reads an
// orphan's header (class 48, generation g, offset 144 a slot start, object 3,
// freed) and stops before it takes the central lock to adopt. Meanwhile the
// orphan is adopted and released, its generation fast-forwarded to the last
// before the wrap (impl.FastForward), and real periods run through the wrap,
// which retires the set, and back to g, where the superblock is carved for
// class 64 in a new remote set and orphaned again. The header now says
// generation g as the free read it; only the set differs. Offset 144 is inside
// object 2 of class 64, so the free is refused, and a refused free changes no
// state: it must not adopt the new period's orphan first. Without the set
// compared (the mutant adoptstaleset) it adopted it (OrphanedSuperblocks 0)
// and only the header read again found the address bad. Only the yield build
// can hold the free between its read of the header and adopt; the wrap is
// what TestStaleFreeAdoptsOnlyItsPeriod, whose later period is one
// generation on, does not reach.
func TestStaleFreeAdoptsNoPeriodAfterWrap(t *testing.T) {
	a, err := impl.New(impl.Options{Reserve: 4 * spec.SuperblockSize})
	must(t, err)
	defer a.Close()
	q, err := a.NewCache()
	must(t, err)
	r, err := a.NewCache()
	must(t, err)
	var olds [][]byte
	for range 4 {
		b, err := q.Alloc(48) // objects 0..3 of superblock i
		must(t, err)
		olds = append(olds, b)
	}
	i := sbOf(a, olds[0])
	read := genOf(t, a, i) // the generation the stale free reads
	stale := olds[3]       // offset 144
	must(t, q.Free(olds[3]))
	must(t, q.Close()) // an orphan, objects 0..2 live
	var ys [][]byte
	err = during(t, newPause(impl.YieldAdoptLock),
		func() error { return r.Free(stale) }, // r has no entry: a miss, a slot start, an orphan
		func() {
			d, err := a.NewCache()
			must(t, err)
			for _, o := range olds[:3] {
				must(t, d.Free(o)) // adopted on the first free, released on the last
			}
			must(t, impl.FastForward(a, i, impl.DeadTag-1))
			// Real periods from the last generation before the wrap until
			// the count is back at the one the free read.
			for n := 0; genOf(t, a, i) != read; n++ {
				y := allocN(t, d, 64)
				if sbOf(a, y) != i || n > int(read)+1 {
					t.Fatalf("period %d after the fast-forward: superblock %d, generation %d", n, sbOf(a, y), genOf(t, a, i))
				}
				must(t, d.Free(y))
				d.Flush() // released
			}
			for range 4 {
				ys = append(ys, allocN(t, d, 64)) // objects 0..3 of class 64
			}
			must(t, d.Close()) // an orphan again, at generation read
		})
	if sbOf(a, ys[0]) != i || addrOf(ys[0]) != addrOf(olds[0]) || genOf(t, a, i) != read {
		t.Fatalf("the superblock was not reused at generation %d (%#x, %#x, generation %d)",
			read, addrOf(olds[0]), addrOf(ys[0]), genOf(t, a, i))
	}
	if !errors.Is(err, impl.ErrInvalidPointer) && !errors.Is(err, impl.ErrDoubleFree) {
		t.Fatalf("a free that read an orphan 2^32 periods ago: %v, want it refused", err)
	}
	if got := a.Stats().OrphanedSuperblocks; got != 1 {
		t.Fatalf("OrphanedSuperblocks %d after a refused stale free (%v), want 1: the free adopted the orphan of the period after the wrap at the generation it read", got, err)
	}
	e, err := a.NewCache()
	must(t, err)
	for _, y := range ys {
		must(t, e.Free(y))
	}
	must(t, e.Close())
	must(t, r.Close())
}
