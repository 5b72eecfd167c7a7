package impl_test

import (
	"fmt"
	"testing"

	"github.com/refalloc/refalloc/impl"
)

// The first benchmarks: a Cache's alloc+free pair against make([]byte, n) (its
// cost includes the GC's), at 16, 64, 256 and 4096 bytes, LIFO (one object
// allocated and freed at a time, one other kept live so the superblock never
// empties) and in batches of 1000. ns/op is per alloc+free pair. The full suite,
// with peers, is in bench/.

var sizes = []int{16, 64, 256, 4096}

var sink []byte

func BenchmarkPair(b *testing.B) {
	for _, n := range sizes {
		b.Run(fmt.Sprintf("refalloc/%d/lifo", n), func(b *testing.B) {
			c := benchCache(b)
			keep, _ := c.Alloc(n)
			for b.Loop() {
				p, _ := c.Alloc(n)
				p[0] = 1
				c.Free(p)
			}
			c.Free(keep)
		})
		b.Run(fmt.Sprintf("make/%d/lifo", n), func(b *testing.B) {
			for b.Loop() {
				p := make([]byte, n)
				p[0] = 1
				sink = p
			}
		})
		b.Run(fmt.Sprintf("refalloc/%d/batch1000", n), func(b *testing.B) {
			c := benchCache(b)
			objs := make([][]byte, 1000)
			for i := 0; i < b.N; i += len(objs) {
				for j := range objs {
					objs[j], _ = c.Alloc(n)
					objs[j][0] = 1
				}
				for j := range objs {
					c.Free(objs[j])
				}
			}
		})
		b.Run(fmt.Sprintf("make/%d/batch1000", n), func(b *testing.B) {
			objs := make([][]byte, 1000)
			for i := 0; i < b.N; i += len(objs) {
				for j := range objs {
					objs[j] = make([]byte, n)
					objs[j][0] = 1
				}
				clear(objs)
			}
		})
	}
}

func benchCache(b *testing.B) *impl.Cache {
	a, err := impl.New(impl.Options{})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { a.Close() })
	c, err := a.NewCache()
	if err != nil {
		b.Fatal(err)
	}
	return c
}
