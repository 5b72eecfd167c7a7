package impl_test

import (
	"errors"
	"fmt"
	"runtime/debug"
	"strings"
	"testing"

	"github.com/refalloc/refalloc/impl"
	"github.com/refalloc/refalloc/spec"
)

// newGuarded makes an Allocator in guard mode, with every small allocation
// sampled unless g says otherwise, failing t on any late report.
func newGuarded(t *testing.T, g impl.GuardOptions) *impl.Allocator {
	t.Helper()
	g.Enabled = true
	if g.SampleRate == 0 {
		g.SampleRate = 1
	}
	a, err := impl.New(impl.Options{Reserve: 256 * spec.SuperblockSize, Guard: g, OnError: func(err error) { t.Error(err) }})
	must(t, err)
	t.Cleanup(func() { a.Close() })
	return a
}

// needProtect skips a test of faults where guard mode cannot protect memory
// (-race builds: the Go-heap backend).
func needProtect(t *testing.T, a *impl.Allocator) {
	t.Helper()
	if !a.GuardProtects() {
		t.Skip("the Go-heap backend cannot protect memory (-race): guard mode only poisons")
	}
}

// touch reads (or writes) b[i] with faults turned into panics, and returns the
// report CatchFaults made of the fault, or nil if the access did not fault.
//
//go:noinline
func touch(a *impl.Allocator, b []byte, i int, write bool) (report *impl.UseAfterFreeError) {
	defer a.CatchFaults(func(e *impl.UseAfterFreeError) { report = e })()
	if write {
		writeByte(b, i)
	} else {
		sink = append(sink[:0], readByte(b, i))
	}
	return nil
}

//go:noinline
func readByte(b []byte, i int) byte { return b[i] }

//go:noinline
func writeByte(b []byte, i int) { b[i] = 0x5a }

//go:noinline
func freeHere(t *testing.T, c *impl.Cache, b []byte) { must(t, c.Free(b)) }

// TestGuardFaultAtAccess (GUARD-FAULT): in guard mode a read or a write of a
// freed guarded object faults at the access, small (sampled, rate 1) and
// large, at its first and last byte and in between; CatchFaults turns the
// fault into a report that names the address, the object (its start, class,
// size) and the stacks that allocated it, freed it and made the access.
func TestGuardFaultAtAccess(t *testing.T) {
	for _, tc := range []struct {
		name string
		n    int
	}{{"small", 100}, {"small, 8 bytes", 1}, {"largest small", spec.MaxSmall}, {"large", 200_000}} {
		for _, write := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/write=%v", tc.name, write), func(t *testing.T) {
				a := newGuarded(t, impl.GuardOptions{})
				needProtect(t, a)
				c, _ := a.NewCache()
				defer c.Close()
				b, err := c.Alloc(tc.n)
				must(t, err)
				if want := spec.Usable(tc.n, 1); cap(b) != want {
					t.Fatalf("Alloc(%d) cap %d, want %d", tc.n, cap(b), want)
				}
				for i := range b[:cap(b)] {
					b[:cap(b)][i] = 7
				}
				if r := touch(a, b, 0, write); r != nil {
					t.Fatalf("a live object faulted: %v", r)
				}
				freeHere(t, c, b)
				for _, i := range []int{0, cap(b) / 2, cap(b) - 1} {
					r := touch(a, b[:cap(b)], i, write)
					if r == nil {
						t.Fatalf("byte %d of a freed %d-byte object: no fault", i, cap(b))
					}
					class := spec.Large
					if tc.n <= spec.MaxSmall {
						class = spec.SizeToClass(tc.n)
					}
					if r.Addr != addrOf(b)+uintptr(i) || r.Object != addrOf(b) || r.Offset != i || r.Size != cap(b) || r.Class != class || r.Released {
						t.Errorf("report %+v, want the access at %#x, byte %d of the %d-byte object at %#x, class %d", r, addrOf(b)+uintptr(i), i, cap(b), addrOf(b), class)
					}
					for what, site := range map[string]string{"alloc": r.AllocSite, "free": r.FreeSite, "access": r.AccessSite} {
						if !strings.Contains(site, "TestGuardFaultAtAccess") {
							t.Errorf("the %s stack does not name the test:\n%s", what, site)
						}
					}
					if !strings.Contains(r.FreeSite, "impl_test.freeHere") || strings.Contains(r.AllocSite, "freeHere") {
						t.Errorf("the free stack does not start at freeHere, or the alloc stack does:\nfree:\n%s\nalloc:\n%s", r.FreeSite, r.AllocSite)
					}
					fn := "impl_test.readByte"
					if write {
						fn = "impl_test.writeByte"
					}
					if !strings.HasPrefix(r.AccessSite, "github.com/refalloc/refalloc/impl_test."+strings.TrimPrefix(fn, "impl_test.")) {
						t.Errorf("the access stack does not start at %s:\n%s", fn, r.AccessSite)
					}
					msg := r.Error()
					for _, want := range []string{spec.RuleGuardFault, fmt.Sprintf("%#x", r.Addr), "freed at:", "allocated at:", "accessed at:"} {
						if !strings.Contains(msg, want) {
							t.Errorf("the report does not say %q:\n%s", want, msg)
						}
					}
					if !errors.Is(r, impl.ErrUseAfterFree) {
						t.Errorf("errors.Is(report, ErrUseAfterFree) is false")
					}
				}
				if t.Failed() {
					t.Logf("the report:\n%v", touch(a, b[:cap(b)], 0, write))
				}
			})
		}
	}
}

// TestGuardFrees (GUARD-FAULT, FREE-DOUBLE, FREE-INVALID): a guarded object's
// double free is refused while it is in quarantine and after it left, an
// interior pointer is invalid whether it is live or not, and a refused free
// changes nothing.
func TestGuardFrees(t *testing.T) {
	for _, n := range []int{100, 200_000} {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			a := newGuarded(t, impl.GuardOptions{QuarantineObjects: 1})
			c, _ := a.NewCache()
			defer c.Close()
			b, err := c.Alloc(n)
			must(t, err)
			if err := c.Free(b[16:]); !errors.Is(err, impl.ErrInvalidPointer) {
				t.Errorf("free of an interior pointer of a live guarded object: %v", err)
			}
			must(t, a.Free(b)) // through another cache
			if err := c.Free(b); !errors.Is(err, impl.ErrDoubleFree) {
				t.Errorf("double free in quarantine: %v", err)
			}
			if err := c.Free(b[16:]); !errors.Is(err, impl.ErrInvalidPointer) {
				t.Errorf("free of an interior pointer of a quarantined object: %v", err)
			}
			if q := a.Stats().Guard.Quarantined; q != 1 {
				t.Fatalf("%d objects in quarantine, want 1", q)
			}
			// Another freed object pushes it out (QuarantineObjects 1).
			o, err := c.Alloc(n)
			must(t, err)
			must(t, c.Free(o))
			if g := a.Stats().Guard; g.Quarantined != 1 || g.Released != 1 {
				t.Fatalf("guard stats %+v, want one quarantined and one released", g)
			}
			if err := c.Free(b); !errors.Is(err, impl.ErrDoubleFree) {
				t.Errorf("double free after the quarantine: %v", err)
			}
			if err := c.Free(b[16:]); !errors.Is(err, impl.ErrInvalidPointer) {
				t.Errorf("free of an interior pointer after the quarantine: %v", err)
			}
			s := a.Stats()
			if s.DoubleFrees != 2 || s.InvalidFrees != 3 {
				t.Errorf("%d double and %d invalid frees counted, want 2 and 3", s.DoubleFrees, s.InvalidFrees)
			}
			impl.CheckLeaks(t, a)
		})
	}
}

// TestGuardQuarantineBounded (GUARD-FAULT): the quarantine keeps at most
// QuarantineObjects objects and QuarantineBytes bytes, releases the oldest
// first, and a released object's memory is usable again (no fault, zeroed
// when handed out). A freed object larger than the byte bound is not
// quarantined at all.
func TestGuardQuarantineBounded(t *testing.T) {
	a := newGuarded(t, impl.GuardOptions{QuarantineObjects: 4, QuarantineBytes: 5 * spec.SuperblockSize})
	needProtect(t, a)
	c, _ := a.NewCache()
	defer c.Close()
	var objs [][]byte
	for range 10 {
		b, err := c.Alloc(1000)
		must(t, err)
		objs = append(objs, b)
	}
	for _, b := range objs {
		must(t, c.Free(b))
	}
	if g := a.Stats().Guard; g.Quarantined != 4 || g.Released != 6 || g.QuarantinedBytes != 4*spec.SuperblockSize {
		t.Fatalf("guard stats %+v, want 4 quarantined, 6 released", g)
	}
	for i, b := range objs {
		r := touch(a, b, 10, false)
		if (r != nil) != (i >= 6) {
			t.Errorf("object %d of 10 (the oldest first): fault %v, want one for the last 4 only", i, r)
		}
	}
	// Large: 3 superblocks each against a bound of 5: one at a time.
	var large [][]byte
	for range 3 {
		b, err := c.Alloc(3*spec.SuperblockSize - 100)
		must(t, err)
		large = append(large, b)
	}
	for _, b := range large {
		must(t, c.Free(b))
	}
	// Each large one pushed out what was older, oldest first, until it fit.
	if g := a.Stats().Guard; g.Quarantined != 1 || g.QuarantinedBytes != 3*spec.SuperblockSize || g.Released != 12 {
		t.Errorf("guard stats %+v, want only the last large object", g)
	}
	if r := touch(a, large[2], 5, true); r == nil || r.Class != spec.Large {
		t.Errorf("the last large object freed: report %v", r)
	}
	// Larger than the bound: not quarantined, no fault.
	big, err := c.Alloc(6 * spec.SuperblockSize)
	must(t, err)
	before := a.Stats().Guard
	must(t, c.Free(big))
	if g := a.Stats().Guard; g != before {
		t.Errorf("an object larger than the quarantine changed it: %+v, then %+v", before, g)
	}
	if r := touch(a, big, 0, false); r != nil {
		t.Errorf("an object larger than the quarantine faulted: %v", r)
	}
}

// TestGuardYieldsToAllocation (GUARD-FAULT, OOM-REAL): the quarantine gives
// up its memory, oldest first, to an allocation that finds no room, and a
// sampled allocation that finds none at all is served as usual.
func TestGuardYieldsToAllocation(t *testing.T) {
	a, err := impl.New(impl.Options{Reserve: 8 * spec.SuperblockSize, Guard: impl.GuardOptions{
		Enabled: true, SampleRate: 1, QuarantineBytes: 8 * spec.SuperblockSize, QuarantineObjects: 8}})
	must(t, err)
	defer a.Close()
	c, _ := a.NewCache()
	defer c.Close()
	var objs [][]byte
	for range 8 {
		b, err := c.Alloc(64)
		must(t, err)
		objs = append(objs, b)
	}
	if g := a.Stats().Guard; g.LiveObjects != 8 || g.Superblocks != 8 {
		t.Fatalf("guard stats %+v, want 8 guarded objects, one superblock each", g)
	}
	if _, err := c.Alloc(64); !errors.Is(err, impl.ErrOutOfMemory) {
		t.Fatalf("a ninth allocation in 8 superblocks: %v", err)
	}
	for _, b := range objs {
		must(t, c.Free(b))
	}
	if g := a.Stats().Guard; g.Quarantined != 8 {
		t.Fatalf("guard stats %+v, want 8 quarantined", g)
	}
	big, err := c.Alloc(7*spec.SuperblockSize - 10)
	must(t, err)
	if g := a.Stats().Guard; g.Quarantined != 1 || g.Released != 7 {
		t.Errorf("guard stats %+v after a 7-superblock allocation: want 7 released", g)
	}
	small, err := c.Alloc(64)
	must(t, err)
	if g := a.Stats().Guard; g.Quarantined != 0 || g.LiveObjects != 1 {
		t.Errorf("guard stats %+v after a small allocation: want the last one released for it", g)
	}
	// Nothing left: the next sampled allocation is served from a class
	// superblock, if one can be had; here none can.
	if _, err := c.Alloc(64); !errors.Is(err, impl.ErrOutOfMemory) {
		t.Errorf("an allocation in a full reservation: %v", err)
	}
	must(t, c.Free(big))
	must(t, c.Free(small))
}

// TestGuardSampling (GUARD-FAULT): one small allocation in SampleRate is
// guarded, on average, whichever the class; a negative rate guards none (and
// every large object still); the sampled ones have the class's capacity.
func TestGuardSampling(t *testing.T) {
	for _, rate := range []int{10, 100, -1} {
		t.Run(fmt.Sprint(rate), func(t *testing.T) {
			a := newGuarded(t, impl.GuardOptions{SampleRate: rate, QuarantineObjects: 16})
			c, _ := a.NewCache()
			defer c.Close()
			const n = 8000
			sizes := []int{8, 48, 1000, 20_000}
			for i := range n {
				size := sizes[i%len(sizes)]
				b, err := c.Alloc(size)
				must(t, err)
				if cap(b) != spec.Usable(size, 1) {
					t.Fatalf("Alloc(%d): cap %d", size, cap(b))
				}
				must(t, c.Free(b))
			}
			big, err := c.Alloc(100_000)
			must(t, err)
			must(t, c.Free(big))
			s := a.Stats()
			got := s.Guard.Allocs
			if rate < 0 {
				if got != 0 {
					t.Errorf("rate %d: %d guarded", rate, got)
				}
			} else if want := n / rate; got < uint64(want*6/10) || got > uint64(want*14/10) {
				t.Errorf("rate %d: %d of %d allocations guarded, want about %d", rate, got, n, want)
			}
			if s.Guard.Quarantined == 0 || s.Large.Allocs != 1 {
				t.Errorf("stats %+v", s.Guard)
			}
		})
	}
}

// TestGuardHeapBackend (GUARD-FAULT): where memory cannot be protected (the
// Go-heap backend of -race builds), guard mode quarantines the same way and
// poisons what it quarantines: a write after free is reported when the object
// leaves the quarantine; a read is not caught.
func TestGuardHeapBackend(t *testing.T) {
	var reports []error
	a, err := impl.New(impl.Options{Reserve: 64 * spec.SuperblockSize, HeapBackend: true, OnError: func(err error) { reports = append(reports, err) },
		Guard: impl.GuardOptions{Enabled: true, SampleRate: 1, QuarantineObjects: 1}})
	must(t, err)
	defer a.Close()
	if a.GuardProtects() {
		t.Fatal("the Go-heap backend says it protects memory")
	}
	c, _ := a.NewCache()
	defer c.Close()
	b, err := c.Alloc(100)
	must(t, err)
	must(t, c.Free(b))
	if r := touch(a, b, 3, false); r != nil {
		t.Fatalf("a fault on the Go heap: %v", r)
	}
	if b[3] != impl.Poison {
		t.Errorf("quarantined byte 3 is %#x, want the poison", b[3])
	}
	b[3] = 1 // a write after free
	o, err := c.Alloc(100)
	must(t, err)
	must(t, c.Free(o)) // pushes b out of the quarantine
	var waf *impl.WriteAfterFreeError
	if len(reports) != 1 || !errors.As(reports[0], &waf) || waf.Addr != addrOf(b) || waf.Offset != 3 || waf.Size != cap(b) ||
		!strings.Contains(waf.Site, "TestGuardHeapBackend") {
		t.Fatalf("reports %v, want the write at byte 3 of %#x", reports, addrOf(b))
	}
	if s := a.Stats(); s.WriteAfterFrees != 1 {
		t.Errorf("Stats.WriteAfterFrees %d", s.WriteAfterFrees)
	}
}

// TestGuardOptions: guard mode's settings are checked, and the defaults are
// SPEC's.
func TestGuardOptions(t *testing.T) {
	for _, g := range []impl.GuardOptions{
		{SampleRate: 10}, {QuarantineObjects: 3},
		{Enabled: true, QuarantineObjects: -1}, {Enabled: true, QuarantineBytes: -1}, {Enabled: true, SampleRate: 1 << 31},
	} {
		if a, err := impl.New(impl.Options{Reserve: 16 * spec.SuperblockSize, Guard: g}); err == nil {
			a.Close()
			t.Errorf("Options.Guard %+v was accepted", g)
		}
	}
	a, err := impl.New(impl.Options{Reserve: 64 * spec.SuperblockSize, Guard: impl.GuardOptions{Enabled: true}})
	must(t, err)
	defer a.Close()
	g := a.Snapshot().Guard
	if !g.Enabled || g.SampleRate != 1000 || g.QuarantineObjects != 4096 || g.QuarantineBytes != 16*spec.SuperblockSize || g.Protects != !raceEnabled {
		t.Errorf("defaults: %+v", g)
	}
	if a.GuardProtects() == raceEnabled {
		t.Errorf("GuardProtects %v in a build with race %v", a.GuardProtects(), raceEnabled)
	}
	// GUARD-FAULT: QuarantineBytes 0 means a quarter of the reservation, at
	// most 1 GiB. With the default reservation (Reserve 0) too: a quarter of the
	// reservation taken, at most 1 GiB, not of the Reserve given (slip:
	// quarbytesoptreserve, a quarantine of one superblock).
	d, err := impl.New(impl.Options{Guard: impl.GuardOptions{Enabled: true}})
	must(t, err)
	defer d.Close()
	if got, want := d.Snapshot().Guard.QuarantineBytes, min(1<<30, int(d.Stats().Reserved)/4); got != want {
		t.Errorf("default Reserve: QuarantineBytes %d, want %d (a quarter of the %d-byte reservation, at most 1 GiB)", got, want, d.Stats().Reserved)
	}
	b, err := impl.New(impl.Options{Reserve: 64 * spec.SuperblockSize})
	must(t, err)
	defer b.Close()
	if b.GuardProtects() || b.Snapshot().Guard.Enabled {
		t.Error("guard mode is on by default")
	}
}

// TestGuardLeaksAndRealloc: a live guarded object is a leak like any other,
// with the stack that allocated it; Realloc moves it (its superblock holds
// nothing else) and the old one is quarantined.
func TestGuardLeaksAndRealloc(t *testing.T) {
	a, err := impl.New(impl.Options{Reserve: 64 * spec.SuperblockSize, Guard: impl.GuardOptions{Enabled: true, SampleRate: 1}})
	must(t, err)
	c, _ := a.NewCache()
	b, err := c.Alloc(40)
	must(t, err)
	copy(b, "guarded")
	r, err := c.Realloc(b, 60)
	must(t, err)
	if addrOf(r) == addrOf(b) || string(r[:7]) != "guarded" || cap(r) != 64 {
		t.Fatalf("Realloc(40 → 60): %#x → %#x, %q, cap %d", addrOf(b), addrOf(r), r[:7], cap(r))
	}
	if a.GuardProtects() {
		if e := touch(a, b, 0, false); e == nil {
			t.Error("the object Realloc moved from: no fault")
		}
	}
	leaks := a.Leaks()
	if len(leaks) != 1 || leaks[0].Addr != addrOf(r) || leaks[0].Size != 64 || !strings.Contains(leaks[0].Site, "TestGuardLeaksAndRealloc") {
		t.Errorf("leaks %v, want the 64-byte object at %#x with its site", leaks, addrOf(r))
	}
	c.Close()
	if err := a.Close(); !errors.Is(err, impl.ErrLeaked) || !strings.Contains(err.Error(), " 1 objects") {
		t.Errorf("Close: %v", err)
	}
}

// TestGuardDebug: debug and guard mode together, with some allocations
// sampled (the held groups are cut short, so a group is taken in parts): no
// write after free is reported where none was made.
func TestGuardDebug(t *testing.T) {
	for _, rate := range []int{3, 40} {
		a, err := impl.New(impl.Options{Reserve: 256 * spec.SuperblockSize, Debug: true, OnError: func(err error) { t.Error(err) },
			Guard: impl.GuardOptions{Enabled: true, SampleRate: rate, QuarantineObjects: 8}})
		must(t, err)
		c, _ := a.NewCache()
		for round := range 4 {
			var objs [][]byte
			for i := range 500 {
				b, err := c.Alloc(16 + i%3*100)
				must(t, err)
				for j := range b {
					b[j] = byte(round)
				}
				objs = append(objs, b)
			}
			for _, b := range objs {
				must(t, c.Free(b))
			}
			c.Flush()
		}
		c.Close()
		if s := a.Stats(); s.WriteAfterFrees != 0 || s.Guard.Allocs == 0 {
			t.Errorf("rate %d: %d writes after free reported, %d guarded", rate, s.WriteAfterFrees, s.Guard.Allocs)
		}
		must(t, a.Close())
	}
}

// TestExplain: Explain answers only for a fault in a freed guarded object of
// its Allocator; CatchFaults without a report function panics again with the
// UseAfterFreeError, and lets any other panic go on as it was.
func TestExplain(t *testing.T) {
	a := newGuarded(t, impl.GuardOptions{})
	needProtect(t, a)
	c, _ := a.NewCache()
	defer c.Close()
	b, err := c.Alloc(32)
	must(t, err)
	if _, ok := a.ExplainAddr(addrOf(b)); ok {
		t.Error("Explain of a live object")
	}
	if _, ok := a.Explain("not a fault"); ok {
		t.Error("Explain of a string")
	}
	if _, ok := a.Explain(nil); ok {
		t.Error("Explain of nil")
	}
	must(t, c.Free(b))
	e, ok := a.ExplainAddr(addrOf(b) + 100)
	if !ok || e.Offset != 100 || !strings.Contains(e.Error(), "68 bytes past the end of the 32-byte object") {
		t.Errorf("ExplainAddr past the object: %v", e)
	}
	var repanicked any
	func() {
		defer func() { repanicked = recover() }()
		defer a.CatchFaults(nil)()
		sink = append(sink[:0], readByte(b, 1))
	}()
	if e, ok := repanicked.(*impl.UseAfterFreeError); !ok || e.Offset != 1 || e.AccessSite == "" {
		t.Errorf("CatchFaults(nil) panicked with %v", repanicked)
	}
	if e2, ok := a.Explain(repanicked); !ok || e2 != repanicked {
		t.Errorf("Explain of a UseAfterFreeError: %v %v", e2, ok)
	}
	var other any
	func() {
		defer func() { other = recover() }()
		defer a.CatchFaults(nil)()
		panic("something else")
	}()
	if other != "something else" {
		t.Errorf("another panic came out of CatchFaults as %v", other)
	}
}

// TestGuardReallocFreed (GUARD-FAULT, FREE-DOUBLE): Realloc of a freed
// guarded object fails as its free does, and reads none of its bytes (it
// would fault: the allocator never touches freed memory for the caller).
func TestGuardReallocFreed(t *testing.T) {
	a := newGuarded(t, impl.GuardOptions{})
	c, _ := a.NewCache()
	defer c.Close()
	for _, n := range []int{100, 200_000} {
		b, err := c.Alloc(n)
		must(t, err)
		must(t, c.Free(b))
		if err := noFault(func() error { _, err := c.Realloc(b, 2*n); return err }); !errors.Is(err, impl.ErrDoubleFree) {
			t.Errorf("Realloc of a freed %d-byte guarded object: %v", n, err)
		}
		if err := noFault(func() error { _, err := a.Realloc(b[8:], 2*n); return err }); !errors.Is(err, impl.ErrInvalidPointer) {
			t.Errorf("Realloc of an interior pointer of a freed %d-byte guarded object: %v", n, err)
		}
	}
	if s := a.Stats(); s.DoubleFrees != 2 || s.InvalidFrees != 2 {
		t.Errorf("%d double and %d invalid frees counted, want 2 and 2", s.DoubleFrees, s.InvalidFrees)
	}
}

// noFault runs f with faults turned into panics, and a panic into an error:
// a read of protected memory inside the allocator fails the test that made
// it, by name, instead of killing the test binary.
func noFault(f func() error) (err error) {
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("faulted: %v", r)
		}
	}()
	return f()
}
