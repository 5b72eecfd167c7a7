//go:build refalloc_yield

package impl_test

import (
	"errors"
	"testing"

	"github.com/refalloc/refalloc/impl"
	"github.com/refalloc/refalloc/spec"
)

// TestReallocReservesAfterOOMFlush (FREE-DOUBLE, OOM-REAL): a moving Realloc
// to a large size whose first try at the new object runs out of memory flushes
// the cache and tries again (OOM-REAL), and the object that second try gets
// is reserved just as a first try's would be: a stale free of its address
// while the Realloc still has it (paused in its free of the old object) is
// refused. Accepted, it would pool the run under the Realloc, which then
// returns memory the next Alloc hands out again. The reservation holds six
// superblocks: b (two), keep (one, so b cannot grow in place), and three that
// the new object needs, one of them an empty current superblock that only
// the flush gives back.
func TestReallocReservesAfterOOMFlush(t *testing.T) {
	a, err := impl.New(impl.Options{Reserve: 6 * spec.SuperblockSize})
	must(t, err)
	defer a.Close()
	c, _ := a.NewCache()
	d, _ := a.NewCache()
	b, err := c.Alloc(spec.SuperblockSize + 100) // superblocks 0-1
	must(t, err)
	keep, err := c.Alloc(100) // superblock 2
	must(t, err)
	n := 3 * spec.SuperblockSize
	w, err := c.Alloc(n) // superblocks 3-5: the older object at y
	must(t, err)
	y := addrOf(w)
	must(t, c.Free(w))   // w is a stale pointer to y now
	e, err := c.Alloc(8) // one of superblocks 3-5: an empty current one once e is freed
	must(t, err)
	must(t, c.Free(e))
	if _, err := d.Alloc(n); !errors.Is(err, impl.ErrOutOfMemory) {
		t.Fatalf("the setup leaves room for %d bytes without c's flush: %v", n, err)
	}
	p := newPause(impl.YieldLargeFree) // the Realloc's free of b
	impl.SetScheduler(p)
	done := make(chan []byte)
	go func() {
		nb, err := c.Realloc(b, n)
		if err != nil {
			t.Errorf("Realloc: %v", err)
		}
		done <- nb
	}()
	var nb []byte
	var staleErr error
	select {
	case <-p.paused:
		impl.SetScheduler(nil)
		staleErr = d.Free(w)
		close(p.resume)
		nb = <-done
	case nb = <-done:
		impl.SetScheduler(nil)
		t.Fatal("the Realloc's free of b never paused")
	}
	if addrOf(nb) != y {
		t.Fatalf("the Realloc's new object is at %#x, want y %#x", addrOf(nb), y)
	}
	if !errors.Is(staleErr, impl.ErrDoubleFree) {
		t.Errorf("a stale free of y while the Realloc had it: %v, want ErrDoubleFree", staleErr)
	} else {
		must(t, c.Free(nb))
	}
	must(t, c.Free(keep))
	c.Close()
	d.Close()
}
