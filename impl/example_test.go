package impl_test

import (
	"errors"
	"fmt"
	"strings"
	"sync"

	"github.com/refalloc/refalloc/impl"
)

// A Cache is the fast path: one per goroutine.
func ExampleCache() {
	a, err := impl.New(impl.Options{})
	if err != nil {
		panic(err)
	}
	defer a.Close()
	c, _ := a.NewCache()
	defer c.Close()

	buf, _ := c.Alloc(1500)
	fmt.Println(len(buf), cap(buf), buf[0]) // zeroed over its whole capacity
	copy(buf, "hello")
	fmt.Println(c.Free(buf))

	err = c.Free(buf)
	fmt.Println(errors.Is(err, impl.ErrDoubleFree))
	// Output:
	// 1500 1504 0
	// <nil>
	// true
}

// The Allocator's own methods are safe from any goroutine, and any cache (or
// the Allocator) can free any object: it goes back to the cache that owns it.
func ExampleAllocator() {
	a, _ := impl.New(impl.Options{})
	defer a.Close()
	objs := make(chan []byte, 100)
	var wg sync.WaitGroup
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 25 {
				b, _ := a.Alloc(64)
				objs <- b
			}
		}()
	}
	wg.Wait()
	close(objs)
	freed := 0
	for b := range objs {
		if a.Free(b) == nil {
			freed++
		}
	}
	fmt.Println(freed, len(a.Leaks()))
	// Output: 100 0
}

// Debug mode poisons freed memory and reports a write after free, with the site
// that allocated the object, when the memory comes back.
func ExampleOptions_debug() {
	var reports []error
	a, _ := impl.New(impl.Options{Debug: true, OnError: func(err error) { reports = append(reports, err) }})
	defer a.Close()
	c, _ := a.NewCache()
	b, _ := c.Alloc(64)
	c.Free(b)
	b[3] = 'x' // the bug
	c.Flush()  // the empty superblock is released: its poison is checked

	var waf *impl.WriteAfterFreeError
	fmt.Println(len(reports), errors.As(reports[0], &waf), waf.Offset, strings.Contains(waf.Site, "ExampleOptions_debug"))
	fmt.Println(a.Stats().WriteAfterFrees)
	// Output:
	// 1 true 3 true
	// 1
}

// Leaks lists what is still allocated; CheckLeaks fails a test that leaves
// objects behind (use it as t.Cleanup(func() { impl.CheckLeaks(t, a) })).
func ExampleCheckLeaks() {
	a, _ := impl.New(impl.Options{Debug: true})
	defer a.Close()
	c, _ := a.NewCache()
	c.Alloc(48) // never freed
	t := &reporter{}
	impl.CheckLeaks(t, a)
	fmt.Println(strings.SplitN(t.msg, "\n", 3)[:2])
	// Output: [refalloc: 1 objects leaked: 48-byte object at ADDR, allocated at]
}

// reporter stands in for a *testing.T.
type reporter struct{ msg string }

func (r *reporter) Helper() {}
func (r *reporter) Errorf(format string, args ...any) {
	r.msg = fmt.Sprintf(format, args...)
	// Addresses differ from run to run.
	if i := strings.Index(r.msg, " at 0x"); i >= 0 {
		j := strings.Index(r.msg[i+4:], ",")
		r.msg = r.msg[:i] + " at ADDR" + r.msg[i+4+j:]
	}
}
