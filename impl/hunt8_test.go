package impl_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/refalloc/refalloc/impl"
	"github.com/refalloc/refalloc/spec"
)

// TestCheckLeaksListsTenAndCountsTheRest (EMPTY: the leak report names
// exactly the number of live objects): CheckLeaks lists the first ten leaks,
// then one line counting the ones it left out, and stops. Slip: the loop goes
// on listing after the count line, or the count is off by one.
func TestCheckLeaksListsTenAndCountsTheRest(t *testing.T) {
	a, err := impl.New(impl.Options{Reserve: 8 * spec.SuperblockSize})
	must(t, err)
	defer a.Close()
	c, _ := a.NewCache()
	for range 15 {
		allocN(t, c, 48)
	}
	var f fakeT
	impl.CheckLeaks(&f, a)
	if len(f.errs) != 1 {
		t.Fatalf("CheckLeaks: %q, want one error", f.errs)
	}
	lines := strings.Split(strings.TrimSuffix(f.errs[0], "\n"), "\n")
	if len(lines) != 12 || lines[0] != "refalloc: 15 objects leaked:" || lines[11] != "... and 5 more" {
		t.Fatalf("CheckLeaks of 15 leaks reports\n%s\nwant a header, 10 objects and \"... and 5 more\"", f.errs[0])
	}
	for _, l := range lines[1:11] {
		if !strings.Contains(l, "48-byte object at") {
			t.Errorf("line %q is not a leak", l)
		}
	}
}

// TestRemoteNotSlotNamesClass (FREE-INVALID): a remote free of an address
// that is not a slot start of a superblock another cache owns is refused
// with the superblock's class, as a local one is, both on the miss that
// fills the entry and on the hit after it. Slip: the remote path reports
// class -1 ("unknown"), as for an address outside every superblock.
func TestRemoteNotSlotNamesClass(t *testing.T) {
	a, err := impl.New(impl.Options{Reserve: 8 * spec.SuperblockSize})
	must(t, err)
	defer a.Close()
	c, _ := a.NewCache()
	d, _ := a.NewCache()
	defer c.Close()
	defer d.Close()
	b := allocN(t, c, 256)
	for _, what := range []string{"miss", "hit"} {
		var fe *impl.FreeError
		err := d.Free(b[1:])
		if !errors.As(err, &fe) || !errors.Is(err, impl.ErrInvalidPointer) || fe.Addr != addrOf(b)+1 {
			t.Fatalf("%s: remote free of an interior pointer: %v", what, err)
		}
		if fe.Class != spec.SizeToClass(256) {
			t.Errorf("%s: the refusal names class %d, want %d", what, fe.Class, spec.SizeToClass(256))
		}
	}
	must(t, c.Free(b))
}
