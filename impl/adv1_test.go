package impl_test

import (
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/refalloc/refalloc/impl"
	"github.com/refalloc/refalloc/spec"
)

// waitInFunction waits until some goroutine's stack shows fn (as runtime.Stack
// prints it, e.g. "(*Allocator).drainOrphans"), failing if done is ready
// first (the call returned without stopping there) or after 3 s.
func waitInFunction(t *testing.T, fn string, done <-chan error) {
	t.Helper()
	buf := make([]byte, 1<<20)
	for deadline := time.Now().Add(3 * time.Second); time.Now().Before(deadline); {
		select {
		case err := <-done:
			t.Fatalf("the call returned (%v) before reaching %s", err, fn)
		default:
		}
		if strings.Contains(string(buf[:runtime.Stack(buf, true)]), fn) {
			return
		}
		runtime.Gosched()
	}
	t.Fatalf("no goroutine reached %s in 3 s", fn)
}

// TestCloseForwardsLateRemoteFree (LIFECYCLE, STATS-EXACT): a remote free that
// lands after Close's flush drained the closing cache's stack (here while the
// flush waits for the central lock to drain the orphans) announces the
// superblock on that stack, its owner still the closing cache. Close orphans
// the superblock, seals the stack and forwards what was on it: the orphan must
// reach the orphans' stack, so that the next Flush of any cache collects the
// free. Slip: Close forwards without clearing each superblock's notified, the
// forward's notify sees the mark and pushes it nowhere (closenotifiedkept):
// the free stays pending for good, Frees short by one after every flush.
// Deterministic in the default build: the central lock holds Close at the
// step after its flush's drain and walk.
func TestCloseForwardsLateRemoteFree(t *testing.T) {
	needClassCounters(t)
	a, err := impl.New(impl.Options{Reserve: 8 * spec.SuperblockSize})
	must(t, err)
	defer a.Close()
	c, _ := a.NewCache()
	d, _ := a.NewCache()
	k := spec.SizeToClass(64)
	x := allocN(t, c, 64)
	keep := allocN(t, c, 64) // S stays live: an orphan, not released
	s := sbOf(a, x)
	closeWithLateRemoteFrees(t, a, c, d, x) // remote: c still owns S, and has drained
	d.Flush()
	if st := sbState(t, a, s); st.Owner != -1 || st.Pending[0] != 0 || st.Notified {
		t.Errorf("after Close and a Flush: S owner %d, pending %#x, notified %v; want an orphan, its remote free collected, not notified", st.Owner, st.Pending, st.Notified)
	}
	if got := a.Stats().Classes[k].Frees; got != 1 {
		t.Errorf("class %d Frees = %d after Close and a Flush, want 1: the remote free that landed during Close was never collected (STATS-EXACT)", k, got)
	}
	must(t, d.Free(keep)) // adopts S
}

// TestOOMFlushForwardsOrphanOnStack (OOM-REAL, LIFECYCLE): a remote free into
// the refilling cache's full superblock S lands after the refill drained its
// stack and before its acquisition orphans S (here while the acquisition waits
// for the central lock): S is announced on the refilling cache's stack and then
// orphaned. With the reservation used up the acquisition finds nothing, and the
// refill flushes before it gives up: the flush's drain must forward S to the
// orphans' stack, where the flush's orphan drain collects the free, so that the
// retry adopts S and the allocation returns the freed object instead of
// ErrOutOfMemory. Slip: the flush does not drain its stack, its walk of its
// own superblocks collecting them anyway (flushnodrain).
func TestOOMFlushForwardsOrphanOnStack(t *testing.T) {
	a, err := impl.New(impl.Options{Reserve: 2 * spec.SuperblockSize, Retain: -1})
	must(t, err)
	defer a.Close()
	c, _ := a.NewCache()
	d, _ := a.NewCache()
	size := 4096
	k := spec.SizeToClass(size)
	objs := allocObjects(t, c, size, spec.ClassObjects(k)) // S full, current
	allocN(t, d, spec.SuperblockSize)                      // the other superblock: the pool is empty
	x := objs[3]
	unlock := impl.HoldCentralLock(a)
	defer unlock()
	done := make(chan error, 1)
	var got []byte
	go func() {
		b, err := c.Alloc(size)
		got = b
		done <- err
	}()
	waitInFunction(t, "(*Allocator).acquire", done)
	if err := d.Free(x); err != nil { // remote: c still owns S
		t.Fatalf("remote free of x: %v", err)
	}
	unlock()
	if err := <-done; err != nil {
		t.Fatalf("Alloc(%d) with S's object %#x freed: %v, want S's free object (OOM-REAL)", size, addrOf(x), err)
	}
	if addrOf(got) != addrOf(x) {
		t.Fatalf("Alloc(%d) returned %#x, want S's free object %#x", size, addrOf(got), addrOf(x))
	}
}
