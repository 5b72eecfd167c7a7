package impl_test

import (
	"strings"
	"testing"

	"github.com/refalloc/refalloc/impl"
	"github.com/refalloc/refalloc/spec"
)

//go:noinline
func adv7SiteA(t *testing.T, c *impl.Cache, n int) []byte {
	b, err := c.Alloc(n)
	must(t, err)
	return b
}

//go:noinline
func adv7SiteB(t *testing.T, c *impl.Cache, n int) []byte {
	b, err := c.Alloc(n)
	must(t, err)
	return b
}

// TestLeakSitePerObject (EMPTY, debug mode): Leaks names each leaked small
// object's own allocation site. Objects of one class from two sites,
// alternating, over more than one group of a superblock: every leak must name
// the function that allocated that address, not another object's. Slip:
// leaksitegroup (the site looked up by the group's index).
func TestLeakSitePerObject(t *testing.T) {
	a, err := impl.New(impl.Options{Reserve: 16 * spec.SuperblockSize, Debug: true})
	must(t, err)
	c, _ := a.NewCache()
	want := map[uintptr]string{}
	var objs [][]byte
	for i := range 70 {
		var b []byte
		if i%2 == 0 {
			b = adv7SiteA(t, c, 48)
			want[addrOf(b)] = "adv7SiteA"
		} else {
			b = adv7SiteB(t, c, 48)
			want[addrOf(b)] = "adv7SiteB"
		}
		objs = append(objs, b)
	}
	leaks := a.Leaks()
	if len(leaks) != len(objs) {
		t.Fatalf("%d leaks, want %d", len(leaks), len(objs))
	}
	for _, l := range leaks {
		fn, ok := want[l.Addr]
		if !ok {
			t.Fatalf("leak at %#x: not an object allocated here", l.Addr)
		}
		other := "adv7SiteA"
		if fn == other {
			other = "adv7SiteB"
		}
		if !strings.Contains(l.Site, fn) || strings.Contains(l.Site, other) {
			t.Fatalf("leak at %#x, allocated by %s, names site:\n%s", l.Addr, fn, l.Site)
		}
	}
	for _, b := range objs {
		must(t, c.Free(b))
	}
	must(t, a.Close())
}

// TestHeapBackendTrimClearsLastByte (ZEROED): under the Go-heap backend (the
// default of -race builds) decommitted memory counts as fresh, and a large
// object on it is not zeroed again, so decommit must clear every byte of the
// range, up to its last. Every byte of a two-superblock object is written,
// the object freed and trimmed, and the same run handed out again must read
// zero throughout. Slip: heapdecommitshort.
func TestHeapBackendTrimClearsLastByte(t *testing.T) {
	a, err := impl.New(impl.Options{Reserve: 16 * spec.SuperblockSize, HeapBackend: true})
	must(t, err)
	defer a.Close()
	c, _ := a.NewCache()
	b, err := c.Alloc(2 * sbBytes)
	must(t, err)
	for i := range b {
		b[i] = 0xa5
	}
	must(t, c.Free(b))
	must(t, a.Trim())
	again, err := c.Alloc(2 * sbBytes)
	must(t, err)
	if addrOf(again) != addrOf(b) {
		t.Fatalf("the trimmed run was not reused (%#x, then %#x)", addrOf(b), addrOf(again))
	}
	for i, v := range again {
		if v != 0 {
			t.Fatalf("byte %d of %d of a large object on trimmed memory is %#x", i, len(again), v)
		}
	}
	must(t, c.Free(again))
}

// TestSnapshotChunkLastHeader (REFINES, EMPTY): headers are allocated in
// chunks of 512; the snapshot lists every header ever used, the last of a
// chunk too. A large object takes superblocks 0..510 of a 512-superblock
// reservation, so a small object goes into superblock 511: the snapshot must
// list all 512 and superblock 511 small, and Leaks must report the small
// object. Slip: snapchunklast.
func TestSnapshotChunkLastHeader(t *testing.T) {
	const n = 512
	a, err := impl.New(impl.Options{Reserve: n * spec.SuperblockSize})
	must(t, err)
	c, _ := a.NewCache()
	big, err := c.Alloc((n - 1) * spec.SuperblockSize)
	must(t, err)
	small, err := c.Alloc(48)
	must(t, err)
	if idx := (addrOf(small) - addrOf(big)) >> spec.SuperblockShift; idx != n-1 {
		t.Fatalf("the small object is in superblock %d, want %d", idx, n-1)
	}
	s := a.Snapshot()
	if len(s.Superblocks) != n {
		t.Fatalf("the snapshot lists %d superblocks, want %d", len(s.Superblocks), n)
	}
	if last := s.Superblocks[n-1]; last.Index != n-1 || last.State != impl.SBSmall {
		t.Fatalf("the snapshot's last superblock is %d (%v), want %d small", last.Index, last.State, n-1)
	}
	found := false
	for _, l := range a.Leaks() {
		found = found || l.Addr == addrOf(small)
	}
	if !found {
		t.Fatalf("Leaks does not report the live object at %#x in superblock %d", addrOf(small), n-1)
	}
	must(t, c.Free(small))
	must(t, c.Free(big))
	must(t, a.Close())
}
