package impl_test

import (
	"fmt"
	"testing"

	"github.com/refalloc/refalloc/impl"
	"github.com/refalloc/refalloc/spec"
)

// TestGuardProtectRefusedPartwayRestored (GUARD-FAULT, DEBUG-POISON,
// INTEGRITY): when the kernel refuses to protect a freed guarded object after
// it protected its first page (mprotect stops partway, at the mapping limit),
// the object is pooled as one the kernel refuses to protect, with its access
// restored first: debug mode's poison of it does not fault in the free, and
// the next object on its memory can be written to its last byte. For a small
// guarded object and a two-superblock large one, with and without debug mode.
// Slip (partwaypooled): it is pooled as protect left it.
func TestGuardProtectRefusedPartwayRestored(t *testing.T) {
	for _, debug := range []bool{false, true} {
		for _, size := range []int{64, 2 * spec.SuperblockSize} {
			t.Run(fmt.Sprintf("debug=%v/size=%d", debug, size), func(t *testing.T) {
				a, c := newAllocCache(t, impl.Options{Reserve: 16 * spec.SuperblockSize, Debug: debug,
					Guard:   impl.GuardOptions{Enabled: true, SampleRate: 1},
					OnError: func(err error) { t.Error(err) }})
				needProtect(t, a)
				impl.RefuseProtectPartway(a)
				x := allocN(t, c, size)
				if err := noFault(func() error { return c.Free(x) }); err != nil {
					t.Fatalf("the free of the object the kernel protected partway: %v", err)
				}
				if s := a.Stats(); s.Guard.Quarantined != 0 {
					t.Fatalf("%d objects quarantined, want none: the protection was refused", s.Guard.Quarantined)
				}
				y := allocNoFault(t, c, max(size, spec.SuperblockSize))
				if sbOf(a, y) != sbOf(a, x) || addrOf(y)%spec.SuperblockSize != 0 {
					t.Fatalf("the next object is at %#x, not on the pooled memory at %#x", addrOf(y), addrOf(x))
				}
				if err := noFault(func() error { clear(y); return nil }); err != nil {
					t.Fatalf("writing the object on the pooled memory: %v", err)
				}
				must(t, c.Free(y))
			})
		}
	}
}

// TestGuardProtectRefusedPartwayStuck (GUARD-FAULT, OOM-REAL): when the
// kernel also refuses to restore the access of the object it protected
// partway, the object stays in the quarantine, stuck, and no allocation gets
// its memory; once the kernel restores access, an allocation that runs out
// releases it and can write it whole. Slip (partwaystuckpooled): it is pooled
// anyway, its first page inaccessible.
func TestGuardProtectRefusedPartwayStuck(t *testing.T) {
	const sbs = 8
	a, c := newAllocCache(t, impl.Options{Reserve: sbs * spec.SuperblockSize,
		Guard:   impl.GuardOptions{Enabled: true, SampleRate: 1},
		OnError: func(err error) { t.Error(err) }})
	needProtect(t, a)
	impl.RefuseProtectPartway(a)
	undo := impl.RefuseRestore(a, nil)
	x := allocN(t, c, 64)
	if err := noFault(func() error { return c.Free(x) }); err != nil {
		t.Fatalf("the free of the object the kernel protected partway: %v", err)
	}
	q := a.Snapshot().Guard.Quarantine
	if len(q) != 1 || q[0].Addr != addrOf(x)&^(spec.SuperblockSize-1) || !q[0].Stuck {
		t.Fatalf("quarantine %+v, want only x's superblock %d, stuck", q, sbOf(a, x))
	}
	var held [][]byte
	for {
		var y []byte
		if err := noFault(func() (err error) { y, err = c.Alloc(spec.SuperblockSize); return err }); err != nil {
			break
		}
		if sbOf(a, y) == sbOf(a, x) {
			t.Fatalf("an allocation got the stuck object's superblock %d", sbOf(a, y))
		}
		held = append(held, y)
	}
	if len(held) != sbs-1 {
		t.Fatalf("%d superblocks handed out before running out, want %d (all but the stuck one)", len(held), sbs-1)
	}
	undo()
	y := allocNoFault(t, c, spec.SuperblockSize)
	if sbOf(a, y) != sbOf(a, x) {
		t.Fatalf("after access came back the allocation got superblock %d, not the released %d", sbOf(a, y), sbOf(a, x))
	}
	if err := noFault(func() error { clear(y); return nil }); err != nil {
		t.Fatalf("writing the object on the released memory: %v", err)
	}
	for _, h := range append(held, y) {
		must(t, c.Free(h))
	}
}

// allocNoFault is allocN with a fault in the allocation (its zeroing of
// memory left inaccessible) failing t by name, not killing the test binary.
func allocNoFault(t *testing.T, c *impl.Cache, n int) []byte {
	t.Helper()
	var b []byte
	if err := noFault(func() (err error) { b, err = c.Alloc(n); return err }); err != nil {
		t.Fatalf("Alloc(%d): %v", n, err)
	}
	return b
}
