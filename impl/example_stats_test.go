// The refalloc_nostats build compiles the class counters out: this example's
// output would read 0.
//go:build !refalloc_nostats

package impl_test

import (
	"fmt"

	"github.com/refalloc/refalloc/impl"
	"github.com/refalloc/refalloc/spec"
)

// Stats are cheap to read at any time; after every cache has flushed they are
// exact.
func ExampleAllocator_Stats() {
	a, _ := impl.New(impl.Options{})
	defer a.Close()
	c, _ := a.NewCache()
	var keep [][]byte
	for range 10 {
		b, _ := c.Alloc(100)
		keep = append(keep, b)
	}
	c.Free(keep[0])
	k := spec.SizeToClass(100) // the class of 100-byte requests: 112-byte objects
	s := a.Stats().Classes[k]
	fmt.Println(s.Size, s.Allocs >= 10, s.Frees <= 1) // ahead / behind, never wrong-sided
	c.Flush()
	s = a.Stats().Classes[k]
	fmt.Println(s.Allocs, s.Frees, s.Allocs-s.Frees) // exact after a flush
	// Output:
	// 112 true true
	// 10 1 9
}
