package impl_test

// Paths that no test reached: a coverage run of the whole suite in every
// build CI runs (default, -race, refalloc_check, refalloc_yield,
// refalloc_portable) left them at zero, so any slip in them went unnoticed.
// Each test names its rule and the slip it kills.

import (
	"errors"
	"fmt"
	"testing"
	"unsafe"

	"github.com/refalloc/refalloc/impl"
	"github.com/refalloc/refalloc/spec"
)

// sliceAt is n bytes at addr, an address of the reservation obj lies in: a
// pointer the allocator never handed out.
func sliceAt(obj []byte, addr uintptr, n int) []byte {
	p := unsafe.Pointer(unsafe.SliceData(obj))
	return unsafe.Slice((*byte)(unsafe.Add(p, int(addr-addrOf(obj)))), n)
}

// TestBadFreeWhereNoHeaderWasMade (FREE-INVALID, CONSERVE): headers are made
// 512 superblocks (32 MiB) at a time, when a superblock of the chunk is first
// used, so in a larger reservation an address past every chunk made so far has
// no header at all: lookup finds no chunk. Every way in for a pointer must say
// ErrInvalidPointer there, count it, hand out nothing and make no header: the
// Cache's and the front's Free (the front's miss fill declines it), Realloc to
// a small size (resizable) and to a large one (resize), through a Cache and
// the Allocator, in normal and debug mode. Slips: lookup without its nil
// chunk check, or a caller without its nil header check (a nil dereference, a
// panic instead of an error); a refused Realloc that keeps its new object (a
// leak: Close says ErrLeaked).
func TestBadFreeWhereNoHeaderWasMade(t *testing.T) {
	for _, debug := range []bool{false, true} {
		t.Run(fmt.Sprintf("debug=%v", debug), func(t *testing.T) {
			const chunk = 512 * spec.SuperblockSize
			a, err := impl.New(impl.Options{Reserve: 4 * chunk, Debug: debug})
			must(t, err)
			c, err := a.NewCache()
			must(t, err)
			obj := allocN(t, c, 16) // makes chunk 0, and no other
			s := a.Snapshot()
			addrs := []uintptr{s.Base + chunk, s.Base + 2*chunk + 16*spec.SuperblockSize + 48, s.Base + s.Size - 16}
			calls := []struct {
				name string
				call func(b []byte) error
			}{
				{"Cache.Free", c.Free},
				{"Allocator.Free", a.Free},
				{"Cache.Realloc small", func(b []byte) error { _, err := c.Realloc(b, 8); return err }},
				{"Cache.Realloc large", func(b []byte) error { _, err := c.Realloc(b, spec.MaxSmall+1); return err }},
				{"Allocator.Realloc small", func(b []byte) error { _, err := a.Realloc(b, 8); return err }},
				{"Allocator.Realloc large", func(b []byte) error { _, err := a.Realloc(b, 2*spec.SuperblockSize); return err }},
			}
			rejected := uint64(0)
			for _, addr := range addrs {
				for _, call := range calls {
					err := call.call(sliceAt(obj, addr, 16))
					var fe *impl.FreeError
					if !errors.Is(err, impl.ErrInvalidPointer) || !errors.As(err, &fe) || fe.Addr != addr || fe.Class != -1 {
						t.Fatalf("%s of %#x (offset %#x, no header made): %v, want ErrInvalidPointer at that address, class -1",
							call.name, addr, addr-s.Base, err)
					}
					rejected++
				}
			}
			a.Flush()
			if st := a.Stats(); st.InvalidFrees != rejected || st.DoubleFrees != 0 {
				t.Fatalf("%d bad frees rejected: Stats counts %d invalid, %d double", rejected, st.InvalidFrees, st.DoubleFrees)
			}
			// The refused Reallocs' new objects used (and pooled) superblocks
			// of chunk 0; nothing else made a header.
			for _, sb := range a.Snapshot().Superblocks {
				if sb.Index >= 512 {
					t.Fatalf("superblock %d (%v) has a header: only chunk 0 was ever used", sb.Index, sb.State)
				}
			}
			must(t, c.Free(obj))
			must(t, c.Close())
			must(t, a.Close()) // ErrLeaked if a refused Realloc kept its new object
		})
	}
}

// TestFreeErrorTextWhole (FREE-DOUBLE, FREE-INVALID): a rejected free's message
// names the address, what is known of the object, and the rule, in each of
// FreeError's three forms: a small class (its size), a large object, and an
// address in no object at all, whole (TestFreeErrorText checks parts of the
// class-0 form). Slips: a case of Error's switch dropped or
// merged, the class test moved (class 0 printed as unknown, or -1 as a class).
func TestFreeErrorTextWhole(t *testing.T) {
	a, err := impl.New(impl.Options{Reserve: 64 * spec.SuperblockSize})
	must(t, err)
	defer a.Close()
	c, err := a.NewCache()
	must(t, err)
	defer c.Close()

	small := allocN(t, c, 8)
	must(t, c.Free(small))
	large, err := c.Alloc(spec.MaxSmall + 1)
	must(t, err)
	must(t, c.Free(large))
	s := a.Snapshot()
	cases := []struct {
		b    []byte
		want string
	}{
		{small, fmt.Sprintf("refalloc: double free: %#x (class 0, %d bytes) [FREE-DOUBLE]", addrOf(small), spec.ClassSize(0))},
		{large, fmt.Sprintf("refalloc: double free: %#x (large object) [FREE-DOUBLE]", addrOf(large))},
		{sliceAt(small, s.Base+s.Size-8, 8), fmt.Sprintf("refalloc: invalid pointer: %#x [FREE-INVALID]", s.Base+s.Size-8)},
	}
	for _, tc := range cases {
		if err := c.Free(tc.b); err == nil || err.Error() != tc.want {
			t.Errorf("free of %#x: %v, want %q", addrOf(tc.b), err, tc.want)
		}
	}
}

// TestWriteAfterFreeErrorText (DEBUG-POISON): the report names the first
// written byte, the object's size and address, and, when it was recorded, the
// stack that allocated it; errors.Is knows it as ErrWriteAfterFree. Slips: the site dropped, or added when empty; the
// fields swapped.
func TestWriteAfterFreeErrorText(t *testing.T) {
	e := &impl.WriteAfterFreeError{Addr: 0xc000100040, Offset: 7, Size: 48, Class: 3}
	const want = "refalloc: write after free: byte 7 of the 48-byte object at 0xc000100040 was written after it was freed"
	if got := e.Error(); got != want {
		t.Errorf("no site: %q, want %q", got, want)
	}
	e.Site = "main.f\n\tf.go:12"
	if got := e.Error(); got != want+"; it was allocated at\nmain.f\n\tf.go:12" {
		t.Errorf("with a site: %q", got)
	}
	if !errors.Is(e, impl.ErrWriteAfterFree) {
		t.Error("a WriteAfterFreeError is not ErrWriteAfterFree for errors.Is")
	}
}
