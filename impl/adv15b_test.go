//go:build !refalloc_portable

package impl

import "testing"

// TestAcquireLeavesCacheWhoseTokenFlushTook (FRONT-EXCLUSIVE): a call that
// pinned and found its P's token free (pinned entered the cache) and then,
// before its slow path's CAS, lost the token to Allocator.Flush on another
// thread falls back to a shard; it must leave the P's cache first
// (Cache.exit), or in refalloc_check and refalloc_yield builds the cache
// counts a user for good, and Flush's own enter and every later call on that
// P panic, naming the rule, with no call on the cache. The window is the
// few instructions between pinned and acquire's CAS, which a concurrent
// Flush hits only now and then: the test stands in for Flush by storing
// tokenOutside there, while pinned. Slip: adv15b 02, mutant acquirenoexit
// (acquire falling back to a shard without c.exit()). In the other builds
// users is not counted, and the test checks only that the call got a shard.
func TestAcquireLeavesCacheWhoseTokenFlushTook(t *testing.T) {
	if pinSync {
		t.Skip("-race: pinned takes the token itself, so acquire never finds it taken")
	}
	a, err := New(Options{Reserve: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	p := pin()
	c := a.front.procs.pinned(p)
	if c == nil {
		unpinP(p)
		t.Skip("this goroutine's P has no per-P cache free")
	}
	c.busy.Store(tokenOutside)      // Allocator.Flush took the token after pinned
	got, s := a.front.acquire(p, c) // unpins
	a.front.release(got, s)
	c.busy.Store(tokenFree) // Flush gives it back
	if got == c || s == nil {
		t.Fatal("acquire took the P's cache whose token Flush held")
	}
	if n := c.users.Load(); n != 0 {
		t.Fatalf("the P's cache counts %d users after the call left it for a shard", n)
	}
	a.Flush() // enters every per-P cache (FRONT-EXCLUSIVE)
	b, err := a.Alloc(64)
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Free(b); err != nil {
		t.Fatal(err)
	}
}
