//go:build refalloc_yield

package impl_test

import (
	"fmt"
	"testing"

	"github.com/refalloc/refalloc/impl"
	"github.com/refalloc/refalloc/spec"
)

// TestAllocatorFlushKeepsTokens (FRONT-EXCLUSIVE): Allocator.Flush holds
// every per-P cache's token until it has flushed that cache. Schedule: under
// the scheduler every goroutine's P is slot 0; the front's Alloc leaves slot
// 0 holding a group, and a remote free by d announces its superblock on slot
// 0's stack, so that Flush's flush of slot 0 pops it (drain.pop). There
// Flush pauses, inside slot 0's Flush, while an Alloc on the front runs: it
// must find slot 0's token taken and go to a shard. Slip: Flush gives the
// tokens back before flushing (flushtokensearly): the Alloc takes slot 0
// while Flush uses it, and enter panics with the overlap.
func TestAllocatorFlushKeepsTokens(t *testing.T) {
	a, err := impl.New(impl.Options{Reserve: 8 * spec.SuperblockSize})
	must(t, err)
	defer a.Close()
	d, _ := a.NewCache()
	p := newPause(impl.YieldDrainPop)
	impl.SetScheduler(p) // slot 0 for every call from here on
	x := allocN(t, a, 64)
	must(t, d.Free(x)) // remote: pending on slot 0's superblock, announced on its stack
	var y []byte
	err = during(t, p,
		func() error { a.Flush(); return nil },
		func() {
			defer func() {
				if r := recover(); r != nil {
					t.Errorf("an Alloc on the front while Allocator.Flush flushes slot 0: %v (FRONT-EXCLUSIVE)", r)
				}
			}()
			b, err := a.Alloc(64)
			if err != nil {
				panic(fmt.Sprintf("Alloc: %v", err))
			}
			y = b
		})
	must(t, err)
	if y != nil {
		must(t, a.Free(y))
	}
}
