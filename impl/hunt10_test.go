package impl_test

import (
	"testing"

	"github.com/refalloc/refalloc/impl"
	"github.com/refalloc/refalloc/spec"
)

// Tests from a second mutant hunt of the Cache's fast paths, refill, flush and
// Close (cache.go).

// TestZeroedAfterLowerGroupRetaken (ZEROED): taking a lower group again never
// lowers the mark below which objects may be dirty. 64 objects of 8 bytes
// (groups 0 and 1 of a fresh superblock) are dirtied and freed; the refill
// takes group 0 back, then group 1, and all 32 objects of group 1 must come
// back zeroed. Slip: take sets zeroedFrom to (g+1)*32 of the group it takes,
// not the max with what it was, so group 1 counts as never handed out.
func TestZeroedAfterLowerGroupRetaken(t *testing.T) {
	a, err := impl.New(impl.Options{Reserve: 16 * spec.SuperblockSize})
	must(t, err)
	defer a.Close()
	c, err := a.NewCache()
	must(t, err)
	var bs [][]byte
	for range 64 {
		b, err := c.Alloc(8)
		must(t, err)
		for i := range b[:cap(b)] {
			b[:cap(b)][i] = 0xa5
		}
		bs = append(bs, b)
	}
	for _, b := range bs {
		must(t, c.Free(b))
	}
	for i := range 64 {
		b, err := c.Alloc(8)
		must(t, err)
		for j, x := range b[:cap(b)] {
			if x != 0 {
				t.Fatalf("allocation %d after the frees: byte %d is %#x, want 0", i, j, x)
			}
		}
	}
}
