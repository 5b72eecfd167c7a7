package impl_test

import (
	"errors"
	"fmt"
	"testing"

	"github.com/refalloc/refalloc/impl"
	"github.com/refalloc/refalloc/spec"
)

// TestReview31TailReuse (CACHE-COHERENT, FREE-DOUBLE, FREE-INVALID,
// STATS-EXACT): for each way count and the boundary classes, another cache
// frees a whole superblock of a cache's objects (tail slot included, through
// its superblock-cache entry), a repeated free of the tail is refused, and after
// the superblock is reused by a large object, a free through the stale entry of
// the old tail is refused while the large object's free is taken. The counters
// are exact after the caches flush.
func TestReview31TailReuse(t *testing.T) {
	for _, ways := range []int{1, 8, 128} {
		for _, k := range []int{0, 1, spec.NumClasses - 1} {
			t.Run(fmt.Sprintf("ways%d/class%d", ways, k), func(t *testing.T) {
				a, err := impl.New(impl.Options{Reserve: 8 * spec.SuperblockSize, SuperblockCacheWays: ways})
				must(t, err)
				ca, err := a.NewCache()
				must(t, err)
				cb, err := a.NewCache()
				must(t, err)
				n := spec.ClassObjects(k)
				objs := make([][]byte, n)
				for i := range objs {
					objs[i], err = ca.Alloc(spec.ClassSize(k))
					must(t, err)
				}
				tail := objs[n-1]
				for _, o := range objs {
					must(t, cb.Free(o))
				}
				if err := cb.Free(tail); !errors.Is(err, impl.ErrDoubleFree) {
					t.Fatalf("repeated remote free of the tail: %v", err)
				}
				ca.Flush()
				cb.Flush()
				s := a.Stats()
				if c := s.Classes[k]; impl.ClassCounters && (c.Allocs != uint64(n) || c.Frees != uint64(n)) {
					t.Fatalf("after flush: allocs %d frees %d, want %d", c.Allocs, c.Frees, n)
				}
				// Reuse: large objects over every superblock free.
				var big [][]byte
				for {
					b, err := ca.Alloc(spec.SuperblockSize)
					if err != nil {
						break
					}
					big = append(big, b)
				}
				if err := cb.Free(tail); err == nil {
					t.Fatalf("free of the old tail after reuse taken")
				}
				for _, b := range big {
					must(t, cb.Free(b))
				}
				must(t, ca.Close())
				must(t, cb.Close())
				s = a.Stats()
				if c := s.Classes[k]; impl.ClassCounters && (c.Allocs != uint64(n) || c.Frees != uint64(n)) {
					t.Fatalf("after close: allocs %d frees %d, want %d", c.Allocs, c.Frees, n)
				}
				if s.DoubleFrees+s.InvalidFrees != 2 {
					t.Fatalf("bad frees %d+%d, want 2", s.DoubleFrees, s.InvalidFrees)
				}
				must(t, a.Close())
			})
		}
	}
}

// TestReview31StatsConcurrent (STATS-LEAD, STATS-EXACT): Stats read while
// goroutines allocate and free through the Allocator (across Ps, remote frees
// among them) never shows a class with Frees above Allocs, and after Flush the
// counters are exact.
func TestReview31StatsConcurrent(t *testing.T) {
	needClassCounters(t)
	for _, ways := range []int{1, 128} {
		a, err := impl.New(impl.Options{Reserve: 64 * spec.SuperblockSize, SuperblockCacheWays: ways})
		must(t, err)
		const G, N = 4, 3000
		ch := make(chan []byte, 256)
		done := make(chan struct{})
		stop := make(chan struct{})
		go func() {
			defer close(done)
			for {
				select {
				case <-stop:
					return
				default:
				}
				s := a.Stats()
				for _, c := range s.Classes {
					if c.Frees > c.Allocs {
						t.Errorf("class %d: frees %d > allocs %d", c.Class, c.Frees, c.Allocs)
						return
					}
				}
			}
		}()
		fin := make(chan struct{}, G)
		for g := range G {
			go func() {
				defer func() { fin <- struct{}{} }()
				for i := range N {
					sz := []int{1, 8, spec.ClassSize(spec.NumClasses - 1), 100}[(i+g)%4]
					b, err := a.Alloc(sz)
					if err != nil {
						t.Error(err)
						return
					}
					if g%2 == 0 {
						ch <- b
					} else if err := a.Free(b); err != nil {
						t.Error(err)
						return
					}
				}
			}()
		}
		freer := make(chan struct{})
		go func() {
			defer close(freer)
			for b := range ch {
				if err := a.Free(b); err != nil {
					t.Error(err)
				}
			}
		}()
		for range G {
			<-fin
		}
		close(ch)
		<-freer
		close(stop)
		<-done
		a.Flush()
		s := a.Stats()
		var al, fr uint64
		for _, c := range s.Classes {
			al += c.Allocs
			fr += c.Frees
			if c.Allocs != c.Frees {
				t.Errorf("ways %d class %d after flush: allocs %d frees %d", ways, c.Class, c.Allocs, c.Frees)
			}
		}
		if al != G*N {
			t.Errorf("ways %d: allocs %d, want %d", ways, al, G*N)
		}
		must(t, a.Close())
	}
}

// TestReview31CurrentLagBound (STATS-LAG): the frees of a cache's current
// superblock are published every 64 at most: at no point does Stats report
// 64 or more frees fewer than were made, also after the current superblock
// has published once (relist sets its next limit). Slip (review31 S35): the
// current superblock's limit set one past publishBatch after a publish, and
// 64 local frees stay unpublished.
func TestReview31CurrentLagBound(t *testing.T) {
	needClassCounters(t)
	for _, k := range []int{0, spec.NumClasses - 1} {
		a, err := impl.New(impl.Options{Reserve: 8 * spec.SuperblockSize})
		must(t, err)
		c, err := a.NewCache()
		must(t, err)
		n := min(spec.ClassObjects(k)-1, 300)
		objs := make([][]byte, n)
		for i := range objs {
			objs[i], err = c.Alloc(spec.ClassSize(k))
			must(t, err)
		}
		for i, o := range objs {
			must(t, c.Free(o))
			if got := a.Stats().Classes[k].Frees; uint64(i+1)-got >= 64 {
				t.Fatalf("class %d: %d frees made, %d published: 64 or more unpublished (STATS-LAG)", k, i+1, got)
			}
		}
		must(t, c.Close())
		must(t, a.Close())
	}
}
