//go:build refalloc_yield

package impl_test

import (
	"testing"

	"github.com/refalloc/refalloc/impl"
	"github.com/refalloc/refalloc/spec"
)

// TestResizeFreeWaitsOutZeroing (INTEGRITY): a free of a large object that a
// Realloc resized in place waits until the Realloc's zeroing outside the
// central lock is done, not only until it has begun: paused right after the
// zeroing (large.zeroed), the Realloc still holds the free off, which waits
// (lock.wait) rather than pooling the run, since the pause stands for the
// zeroing's last writes (an unmark before the zeroing let the free pool the
// run under it, and an Alloc hand it to a new owner the zeroing then cleared).
func TestResizeFreeWaitsOutZeroing(t *testing.T) {
	for _, grow := range []bool{false, true} {
		a, err := impl.New(impl.Options{Reserve: 64 * spec.SuperblockSize})
		must(t, err)
		c, _ := a.NewCache()
		d, _ := a.NewCache()
		from, to := 4*spec.SuperblockSize, 2*spec.SuperblockSize+100
		if grow {
			from, to = to, 4*spec.SuperblockSize
		}
		b, err := c.Alloc(from)
		must(t, err)
		stale := b
		p := newPauseAndWatch(impl.YieldLargeZeroed)
		impl.SetScheduler(p)
		reallocDone := make(chan error, 1)
		go func() {
			_, err := c.Realloc(b[:0], to)
			reallocDone <- err
		}()
		select {
		case <-p.paused:
		case err := <-reallocDone:
			impl.SetScheduler(nil)
			t.Fatalf("grow %v: the Realloc never paused after zeroing in place (it returned %v)", grow, err)
		}
		freeDone := make(chan error, 1)
		go func() { freeDone <- d.Free(stale) }()
		select {
		case err := <-freeDone:
			close(p.resume)
			<-reallocDone
			impl.SetScheduler(nil)
			t.Fatalf("grow %v: a free of the object took effect (%v) while the Realloc had not finished zeroing it", grow, err)
		case <-p.waiting:
			close(p.resume)
		}
		must(t, <-reallocDone)
		must(t, <-freeDone)
		impl.SetScheduler(nil)
		if st := a.Stats(); st.Large.LiveObjects != 0 {
			t.Fatalf("grow %v: %d large objects live after the free", grow, st.Large.LiveObjects)
		}
		must(t, a.Close())
	}
}
