package impl_test

// Tests from a mutant hunt of alloc.go, large.go, realloc.go and errors.go:
// each closes a one-line slip the rest of the suite let through (named in
// its comment).

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/refalloc/refalloc/impl"
	"github.com/refalloc/refalloc/spec"
)

// TestNewRejectsBadOptions (MEM-ACCOUNT: Stats.Reserved is the reservation
// asked for; CACHE-COHERENT: W is 1, 8, 16, 32, 64 or 128): New refuses a
// Reserve outside [0, MaxAlloc] and a way count outside those six, and takes
// each of the six, 0 meaning 128. Nothing else in the suite asks for a bad
// option. A Reserve past MaxAlloc is refused before anything is mapped, so
// it is an option error, not ErrOutOfMemory. Slips: the range check drops
// its upper bound (the mmap backend maps the terabyte, NORESERVE); the way
// switch takes another count.
func TestNewRejectsBadOptions(t *testing.T) {
	for _, r := range []int{-1, -spec.SuperblockSize, spec.MaxAlloc + 1} {
		a, err := impl.New(impl.Options{Reserve: r})
		if err == nil || errors.Is(err, impl.ErrOutOfMemory) {
			if a != nil {
				a.Close()
			}
			t.Errorf("New with Reserve %d: %v, want an option error", r, err)
		}
	}
	for _, w := range []int{-1, 2, 4, 31, 48, 129, 256} {
		a, err := impl.New(impl.Options{Reserve: 4 * spec.SuperblockSize, SuperblockCacheWays: w})
		if err == nil {
			a.Close()
			t.Errorf("New with SuperblockCacheWays %d succeeded, want an option error", w)
		}
	}
	for w, want := range map[int]int{0: 128, 1: 1, 8: 8, 16: 16, 32: 32, 64: 64, 128: 128} {
		a, err := impl.New(impl.Options{Reserve: 4 * spec.SuperblockSize, SuperblockCacheWays: w})
		must(t, err)
		if got := a.Snapshot().Ways; got != want {
			t.Errorf("SuperblockCacheWays %d gives %d ways, want %d", w, got, want)
		}
		must(t, a.Close())
	}
}

// TestRefillAdoptsPastFullOrphan (OOM-REAL: before ErrOutOfMemory no
// orphaned superblock of the class has a free object; LIFECYCLE: a refill
// adopts orphans before it takes fresh superblocks): the orphan list of a
// class can start with a full superblock, one its owner kept because it had
// freed into it (ownerFreed) and orphaned last at Close, after its partial
// one. A refill with the pool empty must look past the full orphan and
// adopt the partial one behind it. Slip: adoptOrphan stops (break) at the
// first full orphan instead of skipping it (continue): ErrOutOfMemory.
func TestRefillAdoptsPastFullOrphan(t *testing.T) {
	const size = 4096
	k := spec.SizeToClass(size)
	n := spec.ClassObjects(k)
	a, err := impl.New(impl.Options{Reserve: 2 * spec.SuperblockSize})
	must(t, err)
	defer a.Close()
	x, _ := a.NewCache()
	var objs [][]byte
	for range n { // superblock 0, full
		objs = append(objs, allocN(t, x, size))
	}
	must(t, x.Close()) // a full orphan
	y, _ := a.NewCache()
	must(t, y.Free(objs[0])) // y adopts it by freeing into it: ownerFreed
	objs[0] = allocN(t, y, size)
	objs = append(objs, allocN(t, y, size)) // superblock 1; y keeps the full one
	must(t, y.Close())                      // orphans 1 (partial), then 0 (full)
	s := a.Snapshot()
	full, partial := sbOf(a, objs[1]), sbOf(a, objs[n])
	if full == partial || !slices.Equal(s.Orphans[k], []int{full, partial}) || len(s.FreeRuns) != 0 {
		t.Fatalf("orphans of class %d: %v, want [%d (full) %d (partial)] with the pool empty (runs %v)", k, s.Orphans[k], full, partial, s.FreeRuns)
	}
	z, _ := a.NewCache()
	b, err := z.Alloc(size)
	if err != nil {
		t.Fatalf("an allocation with a partial orphan behind a full one: %v", err)
	}
	if sbOf(a, b) != partial {
		t.Errorf("allocated from superblock %d, want the partial orphan %d", sbOf(a, b), partial)
	}
	must(t, z.Free(b))
	for _, o := range objs {
		must(t, z.Free(o))
	}
	must(t, z.Close())
}

// TestLargeWriteAfterFreeReportedOnce (DEBUG-POISON: a write after free is
// reported once, and counted once, per object handed out again): a freed
// large object written to in two of its superblocks, then allocated again,
// is one write after free, not one per superblock written. Slip: the check
// leaves only the superblock it found the write in (break for return) and
// reports the next one too.
func TestLargeWriteAfterFreeReportedOnce(t *testing.T) {
	var reports []error
	a := newDebugReporting(t, &reports)
	c, _ := a.NewCache()
	defer c.Close()
	const size = 3 * spec.SuperblockSize
	b := allocN(t, c, size)
	must(t, c.Free(b))
	b[:cap(b)][1] = 1 // after free, in its first and second superblocks
	b[:cap(b)][spec.SuperblockSize+1] = 1
	again := allocN(t, c, size)
	if addrOf(again) != addrOf(b) {
		t.Fatalf("the run was not reused (%#x, then %#x)", addrOf(b), addrOf(again))
	}
	var waf *impl.WriteAfterFreeError
	if len(reports) != 1 || !errors.As(reports[0], &waf) || waf.Offset != 1 {
		t.Errorf("reports %v, want one write after free at offset 1", reports)
	}
	if s := a.Stats(); s.WriteAfterFrees != 1 {
		t.Errorf("%d writes after free counted, want 1", s.WriteAfterFrees)
	}
	must(t, c.Free(again))
}

// TestFreeErrorText (FREE-DOUBLE, FREE-INVALID, ALIGN): the errors name what
// was refused: the class of class 0 too, the rule a bad free broke, and the
// size and alignment of a bad request in that order. Slips: Error prints
// the class only from class 1; errInvalid carries FREE-DOUBLE's rule;
// errSize swaps its numbers.
func TestFreeErrorText(t *testing.T) {
	a, err := impl.New(impl.Options{Reserve: 4 * spec.SuperblockSize})
	must(t, err)
	defer a.Close()
	c, _ := a.NewCache()
	defer c.Close()
	b := allocN(t, c, 8)
	keep := allocN(t, c, 8)
	must(t, c.Free(b))
	var fe *impl.FreeError
	if err := c.Free(b); !errors.As(err, &fe) || fe.Class != 0 || fe.Rule != spec.RuleFreeDouble ||
		!strings.Contains(err.Error(), "(class 0, 8 bytes)") {
		t.Errorf("double free of a class-0 object: %v", err)
	}
	if err := c.Free(keep[1:]); !errors.As(err, &fe) || fe.Rule != spec.RuleFreeInvalid ||
		!strings.Contains(err.Error(), spec.RuleFreeInvalid) {
		t.Errorf("interior free: %v, want rule %s", err, spec.RuleFreeInvalid)
	}
	if _, err := c.AllocAligned(-5, 16); err == nil || !strings.Contains(err.Error(), "size -5, alignment 16") {
		t.Errorf("AllocAligned(-5, 16): %v", err)
	}
	must(t, c.Free(keep))
}
