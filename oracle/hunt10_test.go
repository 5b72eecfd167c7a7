package oracle_test

import (
	"testing"

	"github.com/refalloc/refalloc/oracle"
)

// REFINES: a Realloc to exactly the reservation's size is not too large (an
// Alloc of that size is not either); only one byte more is ErrTooLarge. The
// model of 64 superblocks (4 MiB = 4194304 bytes) must accept ErrOutOfMemory for
// the first, as the allocator answers when the object does not fit, and
// refuse it for the second.
// Slip: ReallocRefusal says TooLarge from uintptr(n) >= m.size.
func TestReallocRefusalAtReservationSize(t *testing.T) {
	const reservation = 4194304 // size: 64 superblocks of 64 KiB
	m := oracle.New(base, reservation)
	m.OpenCache(0)
	if v := m.Alloc(0, 100, 1, base, 100, 112, oracle.OK); v != nil {
		t.Fatal(v)
	}
	if got := m.ReallocRefusal(0, reservation); got != oracle.OK {
		t.Errorf("ReallocRefusal(%d) = %v, want ok", reservation, got)
	}
	if got := m.ReallocRefusal(0, reservation+1); got != oracle.TooLarge {
		t.Errorf("ReallocRefusal(%d) = %v, want ErrTooLarge", reservation+1, got)
	}
	wantRule(t, "Realloc to the reservation's size may run out of memory", m.Realloc(0, base, reservation, 0, 0, 0, oracle.OutOfMemory), "")
	wantRule(t, "but is not too large", m.Realloc(0, base, reservation, 0, 0, 0, oracle.TooLarge), "REFINES")
	wantRule(t, "one byte more is", m.Realloc(0, base, reservation+1, 0, 0, 0, oracle.TooLarge), "")
}

// REFINES (ZEROED): the capacity of a new object is the class size exactly:
// Alloc(100) is 112 bytes, and a capacity of 128, more than the class gives,
// is as wrong as 96.
// Slip: NewObject refuses only capacity < o.Usable.
func TestModelRefusesCapacityAboveClass(t *testing.T) {
	m := oracle.New(base, size)
	m.OpenCache(0)
	wantRule(t, "capacity 128 for 100 bytes", m.Alloc(0, 100, 1, base, 100, 128, oracle.OK), "REFINES")
	wantRule(t, "capacity 96 for 100 bytes", m.Alloc(0, 100, 1, base, 100, 96, oracle.OK), "REFINES")
	wantRule(t, "capacity 112 for 100 bytes", m.Alloc(0, 100, 1, base, 100, 112, oracle.OK), "")
}

// FREE-DOUBLE: a Realloc of a freed 8-byte object to 8 bytes (the smallest
// class, which would serve it in place were it live) never returns its own
// address; and refused as a double free, it counted one allocation and one
// free of the 8-byte class (class 0), none of the 16-byte class (class 1).
// Slips: Realloc takes in place for resizable(o, n) without live (o is the
// zero Object, of class 0); RefusedRealloc counts ClassOf(n+1, 1).
func TestModelStaleReallocSmallest(t *testing.T) {
	m := oracle.New(base, size)
	m.OpenCache(0)
	if v := m.Alloc(0, 8, 1, base, 8, 8, oracle.OK); v != nil {
		t.Fatal(v)
	}
	if v := m.Free(0, base, oracle.OK); v != nil {
		t.Fatal(v)
	}
	wantRule(t, "stale Realloc to 8 bytes returned itself", m.Realloc(0, base, 8, base, 8, 8, oracle.OK), "FREE-DOUBLE")
	if len(m.Live()) != 0 {
		t.Errorf("live after a stale Realloc returned itself: %v, want none", m.Live())
	}
	wantRule(t, "stale Realloc refused", m.Realloc(0, base, 8, 0, 0, 0, oracle.DoubleFree), "")
	if got := m.Counts(0); got.Allocs != 2 || got.Frees != 2 {
		t.Errorf("8-byte class: %+v, want 2 allocs 2 frees", got)
	}
	if got := m.Counts(1); got.Allocs != 0 || got.Frees != 0 {
		t.Errorf("16-byte class: %+v, want 0 allocs 0 frees", got)
	}
}
