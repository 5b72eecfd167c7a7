package impl_test

import (
	"runtime"
	"sync"
	"testing"

	"github.com/refalloc/refalloc/impl"
)

// TestFrontGoroutinesLeaveNothing: many goroutines that come and go, each
// allocating through the Allocator's methods and leaving some of its objects
// to a successor to free, leave nothing behind: the number of caches is the
// front's fixed set (per P and shards, made at New) however many goroutines
// ran, and once everything is freed and flushed the allocator is empty
// (EMPTY) with exact statistics (STATS-EXACT).
func TestFrontGoroutinesLeaveNothing(t *testing.T) {
	if testing.Short() {
		t.Skip("goroutines at once: not deterministic, and -short (cmd/mutants) wants kills that are")
	}
	a, err := impl.New(impl.Options{Reserve: 64 << 20})
	must(t, err)
	defer a.Close()
	caches := len(a.Snapshot().Caches)
	const waves, perWave, perG = 50, 40, 64
	handed := make(chan []byte, perWave*perG)
	for w := range waves {
		var wg sync.WaitGroup
		for g := range perWave {
			wg.Add(1)
			go func() {
				defer wg.Done()
				// Free what an earlier goroutine left, allocate, leave half.
				for range perG / 2 {
					select {
					case b := <-handed:
						if err := a.Free(b); err != nil {
							t.Error(err)
						}
					default:
					}
				}
				for i := range perG {
					b, err := a.Alloc(16 + (w*perWave+g+i)%700)
					if err != nil {
						t.Error(err)
						return
					}
					if i%2 == 0 {
						must(t, a.Free(b))
						continue
					}
					select {
					case handed <- b:
					default:
						must(t, a.Free(b))
					}
				}
			}()
		}
		wg.Wait()
		if n := len(a.Snapshot().Caches); n != caches {
			t.Fatalf("wave %d: %d caches, %d at New", w, n, caches)
		}
	}
	close(handed)
	for b := range handed {
		must(t, a.Free(b))
	}
	a.Flush()
	checkEmpty(t, a)
}

// checkEmpty: with every object freed and the front flushed, the statistics
// are exact and nothing is live or carved.
func checkEmpty(t *testing.T, a *impl.Allocator) {
	t.Helper()
	s := a.Stats()
	for _, c := range s.Classes {
		if c.Allocs != c.Frees {
			t.Fatalf("class %d: %d allocs, %d frees after everything was freed and flushed", c.Class, c.Allocs, c.Frees)
		}
	}
	if s.SmallSuperblocks != 0 || s.LargeSuperblocks != 0 || s.Large.LiveObjects != 0 || s.DoubleFrees+s.InvalidFrees != 0 {
		t.Fatalf("not empty:\n%v", s)
	}
	if l := a.Leaks(); len(l) != 0 {
		t.Fatalf("%d leaks, the first %v", len(l), l[0])
	}
}

// TestFrontFlushWhileAllocating: Allocator.Flush and Trim, which take the
// per-P caches from outside their Ps, run while other goroutines allocate and
// free through the same Allocator; at the end everything is consistent and
// empty. Under -race the detector watches the handover.
func TestFrontFlushWhileAllocating(t *testing.T) {
	if testing.Short() {
		t.Skip("goroutines at once: not deterministic, and -short (cmd/mutants) wants kills that are")
	}
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(max(2, runtime.GOMAXPROCS(0))))
	a, err := impl.New(impl.Options{Reserve: 64 << 20, Retain: -1})
	must(t, err)
	defer a.Close()
	var wg sync.WaitGroup
	stop := make(chan struct{})
	for g := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var ring [32][]byte
			for i := 0; ; i++ {
				select {
				case <-stop:
					for _, b := range ring {
						must(t, a.Free(b))
					}
					return
				default:
				}
				j := i % len(ring)
				must(t, a.Free(ring[j]))
				b, err := a.Alloc(8 + (g*131+i*17)%3000)
				must(t, err)
				b[0] = byte(i)
				ring[j] = b
			}
		}()
	}
	for i := range 200 {
		if i%10 == 0 {
			must(t, a.Trim())
		} else {
			a.Flush()
		}
	}
	close(stop)
	wg.Wait()
	a.Flush()
	checkEmpty(t, a)
}
