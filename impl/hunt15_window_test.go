//go:build refalloc_yield

package impl_test

import (
	"slices"
	"testing"

	"github.com/refalloc/refalloc/impl"
	"github.com/refalloc/refalloc/spec"
)

// TestDrainKeepsRestOfStack (LIFECYCLE, CONSERVE: a superblock marked
// notified is on exactly one notification stack): c owns A (class 256) and
// B (class 512), both full, and d's remote frees announce both on c's stack,
// B on top. c's refill of class 512 drains: it pops B, paused there
// (YieldDrainPop), while d frees a second object of B, which finds B still
// notified and pushes nothing. Then it collects B and goes on to A: the
// refill of class 256 after it hands out A's object freed remotely. Slip:
// the drain reads B's link after resetting B's notified
// (drainnextlate): d's free pushes B again, alone on c's new stack, the link
// the drain then reads is nil, and A, marked notified on no stack, is never
// announced again; its free waits for a Flush, and the refill takes a
// fresh superblock.
func TestDrainKeepsRestOfStack(t *testing.T) {
	a, err := impl.New(impl.Options{Reserve: 8 * spec.SuperblockSize})
	must(t, err)
	defer a.Close()
	c, _ := a.NewCache()
	d, _ := a.NewCache()
	as := allocObjects(t, c, 256, spec.ClassObjects(spec.SizeToClass(256))) // A, full
	bs := allocObjects(t, c, 512, spec.ClassObjects(spec.SizeToClass(512))) // B, full
	sa := sbOf(a, as[0])
	must(t, d.Free(as[0])) // A on c's stack
	must(t, d.Free(bs[0])) // B on top
	err = during(t, newPause(impl.YieldDrainPop),
		func() error { _, err := c.Alloc(512); return err }, // the refill drains, B first
		func() { must(t, d.Free(bs[1])) })                   // B again, meanwhile
	must(t, err)
	s := a.Snapshot()
	for _, st := range s.Superblocks {
		if st.Index != sa || !st.Notified {
			continue
		}
		on := slices.Contains(s.OrphanNotify, sa)
		for _, cs := range s.Caches {
			on = on || slices.Contains(cs.Notify, sa)
		}
		if !on {
			t.Errorf("superblock %d is marked notified and on no notification stack", sa)
		}
	}
	got := allocN(t, c, 256)
	if addrOf(got) != addrOf(as[0]) {
		t.Errorf("the refill of class 256 handed out %#x, not the object of its full superblock freed remotely, %#x", addrOf(got), addrOf(as[0]))
	}
}

// TestOrphanDrainSkipsPooled (CONSERVE: the pool's runs and the superblocks
// in use tile the reservation): a remote free into S, paused after its CAS
// (YieldRemoteNotify) while the owner frees the rest, collects it with a
// Flush and releases S to the pool, then finds S without an owner and
// announces it on the orphans' stack. The next acquire's drain of that stack
// finds S not an orphan and only forwards it. Slip: the drain collects every
// superblock without an owner (orphandrainpooled): S, empty, is released to
// the pool a second time.
func TestOrphanDrainSkipsPooled(t *testing.T) {
	a, err := impl.New(impl.Options{Reserve: 8 * spec.SuperblockSize})
	must(t, err)
	defer a.Close()
	c, _ := a.NewCache()
	d, _ := a.NewCache()
	objs := allocObjects(t, c, 1024, 3)
	err = during(t, newPause(impl.YieldRemoteNotify),
		func() error { return d.Free(objs[1]) },
		func() {
			must(t, c.Free(objs[0]))
			must(t, c.Free(objs[2]))
			c.Flush() // collects the remote free: empty, released
		})
	must(t, err)
	if s := a.Stats(); s.SmallSuperblocks != 0 {
		t.Fatalf("%d small superblocks after the release, want 0", s.SmallSuperblocks)
	}
	b := allocN(t, c, 1024) // acquire: drains the orphans' stack, then carves
	if s := a.Stats(); s.SmallSuperblocks != 1 {
		t.Errorf("%d small superblocks after one was carved, want 1", s.SmallSuperblocks)
	}
	more := allocObjects(t, c, 64, 1) // another superblock from the pool
	if sbOf(a, more[0]) == sbOf(a, b) {
		t.Errorf("two classes share superblock %d", sbOf(a, b))
	}
}
