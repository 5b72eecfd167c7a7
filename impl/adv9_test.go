package impl_test

import (
	"encoding/json"
	"errors"
	"expvar"
	"fmt"
	"runtime"
	"slices"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/refalloc/refalloc/impl"
	"github.com/refalloc/refalloc/impl/expvarstats"
	"github.com/refalloc/refalloc/spec"
)

var expvarNames atomic.Int64

// readVar decodes the published variable name as generic JSON.
func readVar(t *testing.T, name string) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal([]byte(expvar.Get(name).String()), &m); err != nil {
		t.Fatal(err)
	}
	return m
}

// TestExpvarPublishLive (LARGE-EXACT), of package expvarstats but here, where
// cmd/mutants runs it (mutant expvarstale): every read of the variable is a fresh Stats,
// not the one Publish saw: a large allocation made after Publish shows at the
// next read, and its free at the one after, with no flush in between.
func TestExpvarPublishLive(t *testing.T) {
	a, err := impl.New(impl.Options{Reserve: 4 << 20})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	name := fmt.Sprintf("refalloc_adv9_live_%d", expvarNames.Add(1)) // -count=N publishes anew
	expvarstats.Publish(name, a)
	if m := readVar(t, name); m["large_live_objects"] != 0.0 || m["large_allocs"] != 0.0 {
		t.Fatalf("before: %v", m)
	}
	big, err := a.Alloc(200_000)
	if err != nil {
		t.Fatal(err)
	}
	if m := readVar(t, name); m["large_live_objects"] != 1.0 || m["large_allocs"] != 1.0 || m["large_live_bytes"] == 0.0 {
		t.Errorf("after the allocation: %v", m)
	}
	a.Free(big)
	if m := readVar(t, name); m["large_live_objects"] != 0.0 || m["large_frees"] != 1.0 {
		t.Errorf("after the free: %v", m)
	}
}

// TestDebugWriteAfterFreeClass (DEBUG-POISON): a WriteAfterFreeError names
// the object: its class (not class 0) and size, whether it is found as the
// object is handed out again or as its emptied superblock is released, and
// spec.Large for a large object.
func TestDebugWriteAfterFreeClass(t *testing.T) {
	var reports []*impl.WriteAfterFreeError
	a, err := impl.New(impl.Options{Reserve: 64 * spec.SuperblockSize, Debug: true,
		OnError: func(err error) {
			var waf *impl.WriteAfterFreeError
			if !errors.As(err, &waf) {
				t.Errorf("report %v", err)
				return
			}
			reports = append(reports, waf)
		}})
	must(t, err)
	defer a.Close()
	c, err := a.NewCache()
	must(t, err)
	defer c.Close()
	check := func(what string, b []byte, k, off int) {
		t.Helper()
		if len(reports) != 1 {
			t.Fatalf("%s: %d reports", what, len(reports))
		}
		w := reports[0]
		reports = nil
		size := spec.LargeUsable(len(b))
		if k != spec.Large {
			size = spec.ClassSize(k)
		}
		if w.Class != k || w.Size != size || w.Addr != addrOf(b) || w.Offset != off {
			t.Errorf("%s: report %+v, want class %d, size %d, addr %#x, offset %d", what, w, k, size, addrOf(b), off)
		}
	}
	for _, n := range []int{100, 2000, spec.MaxSmall} {
		k := spec.SizeToClass(n)
		// Found as the object is handed out again.
		b, err := c.Alloc(n)
		must(t, err)
		must(t, c.Free(b))
		b[:cap(b)][cap(b)-1] = 1
		reach(t, c, n, b)
		check(fmt.Sprint("hand-out, class ", k), b, k, cap(b)-1)
		c.Flush()

		// Found as the superblock, emptied, is released: the written
		// object is freed first, the other one last.
		b, err = c.Alloc(n)
		must(t, err)
		keep, err := c.Alloc(n)
		must(t, err)
		must(t, c.Free(b))
		b[:cap(b)][1] = 2
		must(t, c.Free(keep))
		c.Flush()
		if len(reports) == 0 {
			t.Logf("class %d: the superblock was not released", k)
			reach(t, c, n, b)
		}
		check(fmt.Sprint("release, class ", k), b, k, 1)
	}
	b, err := c.Alloc(100_000)
	must(t, err)
	must(t, c.Free(b))
	b[:cap(b)][5] = 3
	again, err := c.Alloc(100_000)
	must(t, err)
	check("large", b, spec.Large, 5)
	must(t, c.Free(again))
}

// reach allocates n-byte objects on c until it is handed b's object again,
// then frees them all.
func reach(t *testing.T, c *impl.Cache, n int, b []byte) {
	t.Helper()
	var held [][]byte
	defer func() {
		for _, h := range held {
			must(t, c.Free(h))
		}
	}()
	for range 4096 {
		h, err := c.Alloc(n)
		must(t, err)
		held = append(held, h)
		if addrOf(h) == addrOf(b) {
			return
		}
	}
	t.Fatalf("the object at %#x was not handed out again", addrOf(b))
}

// TestDebugDoubleFreeKeepsEvidence (DEBUG-POISON, FREE-DOUBLE): a double free
// writes nothing (it changes no state), so a write made after the first free
// is still reported when the object is handed out again: re-poisoning the
// free object would erase it.
func TestDebugDoubleFreeKeepsEvidence(t *testing.T) {
	for _, n := range []int{16, 2000} {
		var reports []error
		a, err := impl.New(impl.Options{Reserve: 64 * spec.SuperblockSize, Debug: true,
			OnError: func(err error) { reports = append(reports, err) }})
		must(t, err)
		c, err := a.NewCache()
		must(t, err)
		keep, err := c.Alloc(n)
		must(t, err)
		b, err := c.Alloc(n)
		must(t, err)
		must(t, c.Free(b))
		b[:cap(b)][3] = 7 // the write after free
		if err := c.Free(b); !errors.Is(err, impl.ErrDoubleFree) {
			t.Fatalf("size %d: second free: %v", n, err)
		}
		if b[:cap(b)][3] != 7 {
			t.Errorf("size %d: the double free wrote %#x over the written byte", n, b[:cap(b)][3])
		}
		reach(t, c, n, b)
		var waf *impl.WriteAfterFreeError
		if len(reports) != 1 || !errors.As(reports[0], &waf) || waf.Addr != addrOf(b) || waf.Offset != 3 {
			t.Errorf("size %d: reports %v, want the write after free at byte 3 of %#x", n, reports, addrOf(b))
		}
		if got := a.Stats().WriteAfterFrees; got != 1 {
			t.Errorf("size %d: Stats.WriteAfterFrees = %d", n, got)
		}
		must(t, c.Free(keep))
		must(t, c.Close())
		must(t, a.Close())
	}
}

// Example_readme is the README's first example, with what its comments say:
// the Allocator's own methods, len 1500 and cap 1504, zeroed; a double free
// is an error for errors.Is; AllocAligned and Realloc.
func Example_readme() {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1)) // one P: a second free on another P's cache is remote, its double free found only later
	a, err := impl.New(impl.Options{})
	if err != nil {
		panic(err)
	}
	defer a.Close()

	buf, err := a.Alloc(1500)
	fmt.Println(len(buf), cap(buf), buf[:cap(buf)][cap(buf)-1], err)
	fmt.Println(a.Free(buf), errors.Is(a.Free(buf), impl.ErrDoubleFree))
	b, _ := a.AllocAligned(64, 64)
	fmt.Println(len(b), addrOf(b)%64)
	copy(b, "kept")
	b, _ = a.Realloc(b, 200)
	fmt.Println(len(b), string(b[:4]), b[199])
	fmt.Println(a.Free(b), len(a.Leaks()))
	// Output:
	// 1500 1504 0 <nil>
	// <nil> true
	// 64 0
	// 200 kept 0
	// <nil> 0
}

//go:noinline
func allocSiteCache(c *impl.Cache, n int) []byte {
	b, _ := c.Alloc(n)
	return b
}

//go:noinline
func allocSiteFront(a *impl.Allocator, n int) []byte {
	b, _ := a.Alloc(n)
	return b
}

// TestDebugSiteStartsAtCaller (DEBUG-POISON): an allocation site, in Leaks and
// in a WriteAfterFreeError, is the stack that called into impl, formatted as
// a panic's: its first frame is the caller's, and no frame is impl's own.
func TestDebugSiteStartsAtCaller(t *testing.T) {
	var reports []error
	a, err := impl.New(impl.Options{Reserve: 64 * spec.SuperblockSize, Debug: true,
		OnError: func(err error) { reports = append(reports, err) }})
	must(t, err)
	defer a.Close()
	c, err := a.NewCache()
	must(t, err)
	defer c.Close()
	check := func(what, site, fn string) {
		t.Helper()
		first, _, _ := strings.Cut(site, "\n")
		if first != "github.com/refalloc/refalloc/impl_test."+fn || strings.Contains(site, "github.com/refalloc/refalloc/impl.") ||
			!strings.Contains(site, "adv9_test.go:") {
			t.Errorf("%s: site\n%s", what, site)
		}
	}
	var held [][]byte
	for _, n := range []int{48, 100_000} {
		held = append(held, allocSiteCache(c, n), allocSiteFront(a, n))
	}
	leaks := a.Leaks()
	if len(leaks) != len(held) {
		t.Fatalf("%d leaks, %d held", len(leaks), len(held))
	}
	for _, l := range leaks {
		i := slices.IndexFunc(held, func(b []byte) bool { return addrOf(b) == l.Addr })
		if i < 0 {
			t.Fatalf("leak %+v not held", l)
		}
		check(fmt.Sprintf("leak %d (%d bytes)", i, l.Size), l.Site, []string{"allocSiteCache", "allocSiteFront"}[i%2])
	}
	for _, b := range held {
		must(t, a.Free(b))
	}
	b := allocSiteCache(c, 48)
	must(t, c.Free(b))
	b[0] = 1
	reach(t, c, 48, b)
	var waf *impl.WriteAfterFreeError
	if len(reports) != 1 || !errors.As(reports[0], &waf) {
		t.Fatalf("reports %v", reports)
	}
	check("write after free", waf.Site, "allocSiteCache")
}

// TestDebugEveryObjectVerified (DEBUG-POISON): in debug mode every object
// handed out again has its poison verified, whatever its place in its group
// of 32 (the last one included): two groups of objects are freed, each
// written after its free, and allocated again: one report each.
func TestDebugEveryObjectVerified(t *testing.T) {
	var reports []error
	a, err := impl.New(impl.Options{Reserve: 64 * spec.SuperblockSize, Debug: true,
		OnError: func(err error) { reports = append(reports, err) }})
	must(t, err)
	defer a.Close()
	c, err := a.NewCache()
	must(t, err)
	defer c.Close()
	const n = 48
	keep, err := c.Alloc(n) // the superblock stays in use
	must(t, err)
	objs := map[uintptr][]byte{}
	for range 64 {
		b, err := c.Alloc(n)
		must(t, err)
		objs[addrOf(b)] = b
	}
	for _, b := range objs {
		must(t, c.Free(b))
	}
	for _, b := range objs {
		b[:cap(b)][cap(b)-1] = 9
	}
	var again [][]byte
	for seen := 0; seen < len(objs) && len(again) < 4096; {
		b, err := c.Alloc(n)
		must(t, err)
		again = append(again, b)
		if objs[addrOf(b)] != nil {
			seen++
		}
	}
	if len(reports) != len(objs) {
		t.Errorf("%d writes after free reported, %d made", len(reports), len(objs))
	}
	for _, b := range again {
		must(t, c.Free(b))
	}
	must(t, c.Free(keep))
}

// TestDebugInteriorFreeWritesNothing (FREE-INVALID, DEBUG-POISON): in debug
// mode a local free of a pointer inside a live object is refused and writes
// nothing: neither the object nor the one after it, which is live too, is
// poisoned.
func TestDebugInteriorFreeWritesNothing(t *testing.T) {
	a, err := impl.New(impl.Options{Reserve: 64 * spec.SuperblockSize, Debug: true})
	must(t, err)
	defer a.Close()
	c, err := a.NewCache()
	must(t, err)
	defer c.Close()
	for _, n := range []int{48, 2000} {
		objs := make([][]byte, 3)
		for i := range objs {
			objs[i], err = c.Alloc(n)
			must(t, err)
			for j := range objs[i][:cap(objs[i])] {
				objs[i][:cap(objs[i])][j] = byte(i + 1)
			}
		}
		size := cap(objs[0])
		for _, off := range []int{1, 8, size / 2, size - 1} {
			for _, o := range objs {
				if err := c.Free(o[off:cap(o)]); !errors.Is(err, impl.ErrInvalidPointer) {
					t.Fatalf("size %d: free at offset %d: %v", n, off, err)
				}
			}
			for i, o := range objs {
				for j, x := range o[:cap(o)] {
					if x != byte(i+1) {
						t.Fatalf("size %d: after frees at offset %d, object %d holds %#x at byte %d", n, off, i, x, j)
					}
				}
			}
		}
		for _, o := range objs {
			must(t, c.Free(o))
		}
	}
}
