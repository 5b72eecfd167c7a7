//go:build !refalloc_portable

package impl_test

import (
	"bytes"
	"errors"
	"runtime"
	"testing"
	"unsafe"

	"github.com/refalloc/refalloc/impl"
	"github.com/refalloc/refalloc/spec"
)

// oomRetryFixture makes an Allocator whose next small allocation of a new
// class, on P 0's cache, runs out on its first attempt and is served only
// after the front flushes every internal cache (OOM-REAL): every other
// internal cache keeps an empty superblock of class 16, P 0's cache (the one
// a goroutine under GOMAXPROCS 1 uses) keeps a superblock with one live
// object, held, returned, and a live large object takes the rest of the
// reservation. The caller must have set GOMAXPROCS to 1.
func oomRetryFixture(t *testing.T) (a *impl.Allocator, held, large []byte) {
	t.Helper()
	nc := frontCacheCount(t)
	a, err := impl.New(impl.Options{Reserve: (nc + 1) * spec.SuperblockSize})
	must(t, err)
	t.Cleanup(func() { a.Close() })
	for i := 1; i < nc; i++ {
		keepEmptySuperblock(t, a, i)
	}
	held, err = a.Alloc(16) // P 0's cache: GOMAXPROCS is 1
	must(t, err)
	for i := range held {
		held[i] = byte(i + 1)
	}
	large, err = a.Alloc(spec.SuperblockSize)
	must(t, err)
	if s := a.Stats(); s.SmallSuperblocks != nc || s.LargeSuperblocks != 1 {
		t.Fatalf("fixture: %d small and %d large superblocks, want %d and 1", s.SmallSuperblocks, s.LargeSuperblocks, nc)
	}
	return a, held, large
}

// TestFrontOOMRetryAligned (OOM-REAL, ALIGN): an AllocAligned through the
// Allocator that runs out on its first attempt and succeeds after the front
// flushed every internal cache returns what AllocAligned promises: an object
// of the aligned class (slip: the retry asked for alignment 1, and got a
// 48-byte object of class 48 for AllocAligned(48, 64)).
func TestFrontOOMRetryAligned(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	a, _, _ := oomRetryFixture(t)
	const n, align = 48, 64
	b, err := a.AllocAligned(n, align)
	if err != nil {
		t.Fatalf("AllocAligned(%d, %d) with empty superblocks in other internal caches: %v (OOM-REAL)", n, align, err)
	}
	want := spec.ClassSize(spec.AlignedClass(n, align))
	if p := uintptr(unsafe.Pointer(unsafe.SliceData(b))); len(b) != n || cap(b) != want || p%align != 0 {
		t.Fatalf("AllocAligned(%d, %d) after the OOM flush: len %d cap %d at %#x, want len %d cap %d aligned to %d",
			n, align, len(b), cap(b), p, n, want, align)
	}
	must(t, a.Free(b))
}

// TestFrontOOMRetryReallocKeepsB (OOM-REAL, REFINES, CONSERVE): a moving
// Realloc through the Allocator whose allocation runs out on the first
// attempt looks again after the front flushed every internal cache, with the
// same b: the result keeps b's bytes and b is freed (slip: the retry was a
// Realloc of nil, an Alloc, which returned an object holding zeros and left b
// live for good).
func TestFrontOOMRetryReallocKeepsB(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	a, held, _ := oomRetryFixture(t)
	want := bytes.Clone(held)
	r, err := a.Realloc(held, 64)
	if err != nil {
		t.Fatalf("Realloc(b, 64) with empty superblocks in other internal caches: %v (OOM-REAL)", err)
	}
	if !bytes.Equal(r[:len(want)], want) {
		t.Fatalf("Realloc after the OOM flush kept %v, want b's bytes %v", r[:len(want)], want)
	}
	if err := a.Free(held); !errors.Is(err, impl.ErrDoubleFree) {
		t.Fatalf("Free of b after it was Realloc'd: %v, want ErrDoubleFree", err)
	}
	must(t, a.Free(r))
}
