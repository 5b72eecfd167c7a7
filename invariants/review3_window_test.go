//go:build refalloc_yield

package invariants_test

import (
	"sync/atomic"
	"testing"

	"github.com/refalloc/refalloc/impl"
	"github.com/refalloc/refalloc/invariants"
)

// pauseAt is an impl.Scheduler that stops the first goroutine to reach point
// until released.
type pauseAt struct {
	point          string
	taken          atomic.Bool
	paused, resume chan struct{}
}

func (p *pauseAt) Yield(point string) {
	if point == p.point && p.taken.CompareAndSwap(false, true) {
		close(p.paused)
		<-p.resume
	}
}

func (p *pauseAt) Bucket() uint32 { return 0 }

// TestSharedReallocRefusedByRacingFree (STATS-EXACT, oracle.Model.RefusedRealloc):
// a stale free of an object lands while a moving Realloc of it has allocated
// its new object and not yet freed the old one (realloc.moved); the Realloc is
// then refused (FREE-DOUBLE) and gives its new object back. Shared judges the
// address later, and must count the refused Realloc's allocation and free of
// the new object's class, or the flushed Stats disagree with the model.
func TestSharedReallocRefusedByRacingFree(t *testing.T) {
	sh, err := invariants.NewShared(impl.Options{Reserve: 16 << 16})
	must(t, err)
	defer sh.Close()
	c1, id1, err := sh.OpenCache()
	must(t, err)
	c2, id2, err := sh.OpenCache()
	must(t, err)
	o, ok := sh.Alloc(c1, id1, 100, 1, 5)
	if !ok {
		t.Fatal("Alloc failed")
	}
	p := &pauseAt{point: impl.YieldReallocMoved, paused: make(chan struct{}), resume: make(chan struct{})}
	impl.SetScheduler(p)
	done := make(chan bool)
	go func() {
		_, ok := sh.Realloc(c1, id1, o, 3000, 6) // another class: it moves
		done <- ok
	}()
	<-p.paused
	sh.StaleFree(c2, id2, o.B) // frees it first: the Realloc's own free is refused
	close(p.resume)
	if <-done {
		t.Fatal("the Realloc whose object a racing free took succeeded")
	}
	impl.SetScheduler(nil)
	c1.Flush()
	c2.Flush()
	sh.A.Flush()
	sh.Check(true)
	if vs := sh.Violations(); len(vs) > 0 {
		t.Fatalf("%v", vs)
	}
	sh.CloseCache(c1, id1)
	sh.CloseCache(c2, id2)
}
