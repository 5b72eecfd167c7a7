//go:build !refalloc_portable

package impl

import (
	"fmt"
	"runtime"
	"sync/atomic"
	"testing"
	"time"
)

// TestFlushTakesTokensBeforeWaiting (FRONT-EXCLUSIVE): Allocator.Flush takes
// every per-P cache's token and only then waits for the pinned goroutines.
// Every per-P token is held by "a slow path", so Flush waits on them; then a
// goroutine pins, its P's slow path ends (its token goes free), and the
// goroutine, having found the token free, stays in its fast path for 30 ms while
// the other slow paths end. Flush then takes every token and must wait for the
// pinned goroutine before it flushes that cache. Waiting first, before taking
// the tokens, it returns while the fast path is still running.
func TestFlushTakesTokensBeforeWaiting(t *testing.T) {
	if pinSync {
		t.Skip("under -race the fast path takes the token: Flush waits on it")
	}
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(2))
	a, err := New(Options{Reserve: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	procs := a.front.procs.caches()
	for _, c := range procs { // a slow path on every P's cache
		c.busy.Store(tokenP)
	}
	var flushed atomic.Bool
	var overlap atomic.Value
	go func() {
		// With checks on (refalloc_check, refalloc_yield), Flush's enter
		// panics when it meets the fast path: that is the bug found too.
		defer func() {
			if r := recover(); r != nil {
				overlap.Store(fmt.Sprint(r))
			}
			flushed.Store(true)
		}()
		a.Flush()
	}()
	time.Sleep(5 * time.Millisecond) // Flush waits on the tokens
	var inside, done atomic.Bool
	mine := -1
	go func() {
		p := pin()
		if p >= len(procs) {
			unpinP(p)
			inside.Store(true)
			return
		}
		mine = p
		// This P's slow path ends, and the fast path, pinned, finds the
		// token free: what pinned(p) does after its load, done here so that
		// Flush's take cannot come between the store and that load.
		c := procs[p]
		c.busy.Store(tokenFree)
		if !c.tryEnter() {
			unpinP(p)
			inside.Store(true)
			return
		}
		inside.Store(true)
		stayPinned(p, c, &done)
	}()
	for !inside.Load() {
		runtime.Gosched()
	}
	for i, c := range procs { // the other slow paths end
		if i != mine {
			c.busy.Store(tokenFree)
		}
	}
	if mine < 0 {
		t.Skip("the goroutine's P has no per-P cache")
	}
	for !flushed.Load() {
		runtime.Gosched()
	}
	if r := overlap.Load(); r != nil {
		t.Fatalf("Flush met a fast path on a per-P cache: %v", r)
	}
	if !done.Load() {
		t.Fatal("Flush flushed a per-P cache while a fast path that found its token free was running on it")
	}
}

// stayPinned is a fast path on c, pinned to p, that runs for 30 ms without
// yielding (the world cannot stop meanwhile), then sets done and unpins.
func stayPinned(p int, c *Cache, done *atomic.Bool) {
	for t0 := time.Now(); time.Since(t0) < 30*time.Millisecond; {
	}
	done.Store(true)
	unpin(p, c)
}
