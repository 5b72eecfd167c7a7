package fuzz

import (
	"errors"
	"flag"
	"math/rand/v2"
	"os"
	"testing"
	"unsafe"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"pgregory.net/rapid"

	"github.com/refalloc/refalloc/impl"
	"github.com/refalloc/refalloc/internal/mutant"
	"github.com/refalloc/refalloc/invariants"
	"github.com/refalloc/refalloc/oracle"
	"github.com/refalloc/refalloc/spec"
)

// Through rapid.MakeFuzz each input is one machine run: fewer steps than the
// machine test (300) keep the fuzzer's executions fast.
func TestMain(m *testing.M) {
	flag.Parse()
	set := os.Getenv("RAPID_STEPS") != ""
	flag.Visit(func(f *flag.Flag) { set = set || f.Name == "rapid.steps" })
	if mutant.Active() != "" {
		// Under an injected bug (cmd/mutants): no fail files in the tree, and
		// a kill need not wait for rapid to shrink it.
		flag.Set("rapid.nofailfile", "true")
		flag.Set("rapid.shrinktime", "2s")
	}
	if !set {
		flag.Set("rapid.steps", "60")
	}
	os.Exit(m.Run())
}

// BadDoubleKind is the align of an OpRealloc (flags mode 3) or OpFreeBad of a
// freed object.
const BadDoubleKind = invariants.BadDouble

func cmd(op Op, cache uint8, size uint16, align uint8, victim uint16, flags uint8) Cmd {
	return Cmd{Op: op, Cache: cache, Size: size, Align: align, Victim: victim, Flags: flags}
}

// seedPrograms exercise each op and the paths between them: recycling with
// holes, cross-cache frees, bad frees of each kind, closes, large objects.
func seedPrograms() []Program {
	var ps []Program
	var recycle []Cmd
	for i := range 40 {
		recycle = append(recycle, cmd(OpAlloc, uint8(i%3), 4000, 0, 0, 1))
	}
	for i := range 20 {
		recycle = append(recycle, cmd(OpFreeCross, uint8(i), 0, 0, uint16(i*7), 0))
	}
	recycle = append(recycle, cmd(OpFlushAll, 0, 0, 0, 0, 0))
	for i := range 20 {
		recycle = append(recycle, cmd(OpAlloc, uint8(i%3), 4000, 0, 0, 1), cmd(OpFreeBad, uint8(i%4), 0, uint8(i), uint16(i), 0))
	}
	ps = append(ps, Program{Header: 0, Cmds: recycle})
	var all []Cmd
	for op := range NumOps {
		all = append(all, cmd(OpAlloc, 0, 300, 0, 0, 0), cmd(op, 1, uint16(op)*911, uint8(op), uint16(op), uint8(op)))
	}
	ps = append(ps, Program{Header: 5, Cmds: all})
	// Realloc of every kind, on every way count: each object at its edges,
	// on its owner, another cache and the Allocator, and back again; stale
	// slices in their own class; the Allocator's methods; tails; edge sizes.
	var api []Cmd
	for i := range 48 {
		api = append(api,
			cmd(OpAlloc, uint8(i%4), uint16(i*613), 0, 0, uint8(i%4)),
			cmd(OpRealloc, uint8(i+1), uint16(i), uint8(i), uint16(i), uint8(i%4<<2|16|(i%2)<<5)),
			cmd(OpAllocEdge, uint8(i), uint16(i*7), uint8(i), 0, uint8(i%2)<<2),
			cmd(OpFreeTail, uint8(i), 0, uint8(i), uint16(i*3), 0),
			cmd(OpAllocator, 0, 0, uint8(i), 0, 0))
		if i%6 == 5 {
			api = append(api, cmd(OpFreeLocal, 0, 0, 0, uint16(i), 0), cmd(OpRealloc, uint8(i), uint16(i), uint8(BadDoubleKind), uint16(i), 3<<2|16))
		}
	}
	for _, ways := range []uint8{0x00, 0x10, 0x20, 0x30, 0x14, 0x24} {
		ps = append(ps, Program{Header: ways | 1, Cmds: api})
	}
	ps = append(ps, Program{Header: 0x18, Cmds: api}) // 8 ways, debug
	// A pool that keeps 2 superblocks and returns the rest at every release
	// (MEM-ACCOUNT checked tightly after every command): superblocks
	// recycled, and every kind of call.
	ps = append(ps, Program{Header: 128 | 0x20, Cmds: recycle}, Program{Header: 128 | 0x14 | 1, Cmds: api})
	ps = append(ps, Program{Header: 2, Cmds: []Cmd{
		cmd(OpAlloc, 0, 40000, 0, 0, 3), cmd(OpAllocAligned, 1, 100, 16, 0, 0), cmd(OpCloseCache, 0, 0, 0, 0, 0),
		cmd(OpFreeCross, 1, 0, 0, 0, 0), cmd(OpUseClosed, 0, 8, 0, 0, 0), cmd(OpUseClosed, 0, 0, 1, 0, 0), cmd(OpFreeLocal, 0, 0, 0, 1, 0),
	}})
	// Guard mode (GUARD-FAULT): small and large objects guarded, freed into
	// the quarantine, touched there, freed again (double frees), the
	// quarantine overflowing and yielding to allocations that find no room.
	var guarded []Cmd
	for i := range 24 {
		guarded = append(guarded, cmd(OpAlloc, uint8(i), uint16(i*37), 0, 0, uint8(i%4)), cmd(OpAllocAligned, uint8(i), 64, 6, 0, 1))
	}
	for i := range 16 {
		guarded = append(guarded, cmd(OpFreeCross, uint8(i), 0, 0, uint16(i*5), 0), cmd(OpAllocator, 0, uint16(i), 4, uint16(i*3), uint8(i)),
			cmd(OpRealloc, uint8(i+1), uint16(i*97), uint8(i), uint16(i), uint8(i%4<<2|16)),
			cmd(OpFreeBad, uint8(i), 0, invariants.BadDouble, uint16(i), 0), cmd(OpFreeBad, uint8(i), 0, invariants.BadWild, uint16(i*977), 0))
	}
	for _, h := range []uint8{64, 64 | 128 | 8, 64 | 0x10 | 3} {
		ps = append(ps, Program{Header: h, Cmds: guarded})
	}
	return ps
}

// FuzzProgram decodes bytes into a program of commands over several caches and
// runs it against the allocator and the model, every invariant after every
// command (invariants.Harness).
func FuzzProgram(f *testing.F) {
	for _, p := range seedPrograms() {
		f.Add(Encode(p))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		if err := Run(Decode(data)); err != nil {
			t.Fatal(err)
		}
	})
}

// TestProgramRoundTrip keeps the format honest: Encode and Decode are inverse,
// unknown opcodes are skipped, trailing bytes ignored.
func TestProgramRoundTrip(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for range 200 {
		p := Program{Header: uint8(rng.IntN(256))}
		for range rng.IntN(50) { // < MaxCmds
			p.Cmds = append(p.Cmds, cmd(Op(rng.IntN(int(NumOps))), uint8(rng.IntN(256)), uint16(rng.IntN(1<<16)),
				uint8(rng.IntN(256)), uint16(rng.IntN(1<<16)), uint8(rng.IntN(256))))
		}
		if d := cmp.Diff(p, Decode(Encode(p)), cmpopts.EquateEmpty()); d != "" {
			t.Fatalf("round trip (-want +got):\n%s", d)
		}
		data := Encode(p)
		junk := append([]byte{}, data[:1]...)
		junk = append(junk, 0xf0|byte(NumOps), 1, 2, 3, 4, 5, 6, 7) // an unknown opcode
		junk = append(junk, data[1:]...)
		junk = append(junk, 9, 9, 9) // trailing bytes
		if d := cmp.Diff(p, Decode(junk), cmpopts.EquateEmpty()); d != "" {
			t.Fatalf("unknown opcode or trailing bytes changed the program:\n%s", d)
		}
	}
}

// FuzzConcurrent: the bytes choose a schedule for several goroutines (who
// allocates, who frees what, when objects are handed over, bursts where all run
// at once); checked against the model at barriers and at the end.
func FuzzConcurrent(f *testing.F) {
	f.Add([]byte{0, 0, COpAlloc, 10, 1, 1, COpAlloc, 20, 2, 0, COpSend, 0, 1, 1, COpReceive, 0, 0, 2, COpBarrier, 1, 0})
	f.Add([]byte{1, 0, COpBurst, 31, 7, 1, COpBurst, 31, 9, 2, COpReopen, 0, 0, 0, COpBarrier, 1, 0, 1, COpBurst, 20, 3})
	seed := []byte{0}
	for i := range 60 {
		seed = append(seed, byte(i), byte([]int{COpAlloc, COpAlloc, COpSend, COpReceive, COpFree, COpBarrier}[i%6]), byte(i*37), byte(i))
	}
	f.Add(seed)
	guarded := append([]byte{8}, seed[1:]...)
	f.Add(guarded)
	guarded = append([]byte{8 | 16 | 4}, seed[1:]...)
	f.Add(guarded)
	f.Add(append([]byte{32}, seed[1:]...))     // 64 ways
	f.Add(append([]byte{32 | 1}, seed[1:]...)) // 128 ways
	f.Add(append([]byte{64}, seed[1:]...))     // Retain 2 superblocks, Decay -1
	f.Add(append([]byte{64 | 128 | 4}, seed[1:]...))
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) > 4*StepSize*64 {
			data = data[:4*StepSize*64]
		}
		if err := RunConcurrent(data); err != nil {
			t.Fatal(err)
		}
	})
}

// FuzzSizeClasses: size → class → usable size and alignment against the oracle's
// own rules (a scan of the raw table), AllocAligned round trips on a real allocator, and the
// multiplicative-inverse index against real division (spec constraint 7).
func FuzzSizeClasses(f *testing.F) {
	f.Add(uint32(0), uint8(0), uint16(0), uint8(0))
	f.Add(uint32(spec.MaxSmall), uint8(12), uint16(65535), uint8(54))
	f.Add(uint32(spec.MaxSmall+1), uint8(16), uint16(48*1365), uint8(3))
	a, err := impl.New(impl.Options{Reserve: 64 * spec.SuperblockSize})
	if err != nil {
		f.Fatal(err)
	}
	c, _ := a.NewCache()
	f.Fuzz(func(t *testing.T, n32 uint32, shift uint8, off uint16, class uint8) {
		n, align := int(n32%(4*spec.MaxSmall)), 1<<(shift%(spec.SuperblockShift+1))
		// The oracle's own statement of ALIGN (a scan of the raw table), not
		// spec.ClassAlign, which the helper under test is built from.
		if got, want := spec.AlignedClass(n, align), oracle.ClassOf(n, align); got != want {
			t.Fatalf("AlignedClass(%d, %d) = %d, the oracle says %d", n, align, got, want)
		}
		b, err := c.AllocAligned(n, align)
		if err != nil {
			t.Fatalf("AllocAligned(%d, %d): %v", n, align, err)
		}
		p := uintptr(unsafe.Pointer(unsafe.SliceData(b)))
		if len(b) != n || cap(b) != oracle.UsableSize(n, align) || p%uintptr(align) != 0 {
			t.Fatalf("AllocAligned(%d, %d): len %d cap %d at %#x", n, align, len(b), cap(b), p)
		}
		for _, x := range b[:cap(b)] {
			if x != 0 {
				t.Fatalf("AllocAligned(%d, %d) is not zeroed", n, align)
			}
		}
		b[:cap(b)][cap(b)-1] = 1
		if err := c.Free(b); err != nil {
			t.Fatalf("Free: %v", err)
		}
		k := int(class) % spec.NumClasses
		if got := int(uint64(off) * uint64(spec.ClassDivMagic(k)) >> 32); got != int(off)/spec.ClassSize(k) {
			t.Fatalf("class %d: magic index of offset %d = %d, want %d", k, off, got, int(off)/spec.ClassSize(k))
		}
	})
}

// FuzzBadFree: arbitrary addresses (inside, around and outside the reservation,
// interior, misaligned, already freed, the Go heap) are freed after a setup the
// seed chooses; the outcome must be what the snapshot predicts (ExpectFree) and
// the model allows, and a rejected free must leave the state as it was.
func FuzzBadFree(f *testing.F) {
	f.Add(uint64(1), uint8(0), int64(8))
	f.Add(uint64(2), uint8(1), int64(-1))
	f.Add(uint64(3), uint8(2), int64(0))
	f.Add(uint64(4), uint8(0), int64(-spec.SuperblockSize))
	f.Add(uint64(5), uint8(3), int64(17))
	f.Fuzz(func(t *testing.T, seed uint64, kind uint8, offset int64) {
		h, err := invariants.NewHarness(impl.Options{Reserve: 16 * spec.SuperblockSize})
		if err != nil {
			t.Fatal(err)
		}
		defer h.Close()
		c, _ := h.NewCache()
		d, _ := h.NewCache()
		e, _ := h.NewCache() // closes below, holding objects: its superblocks are orphans
		rng := rand.New(rand.NewPCG(seed, 0))
		var freed [][]byte
		for range 12 + rng.IntN(20) {
			sizes := []int{8, 48, 100, 1000, 5000, 40000, 70000}
			if err := h.Alloc([]int{c, d, e}[rng.IntN(3)], sizes[rng.IntN(len(sizes))], 1); err != nil {
				t.Fatal(err)
			}
		}
		for i, a := range h.Live() {
			if i%3 == 0 {
				freed = append(freed, h.Object(a))
				if err := h.Free([]int{c, d, e}[rng.IntN(3)], a); err != nil {
					t.Fatal(err)
				}
			}
		}
		if err := h.CloseCache(e); err != nil {
			t.Fatal(err)
		}
		live := h.Live()
		var b []byte
		switch kind % 4 {
		case 0: // anywhere around the reservation
			base := h.Object(live[0])
			start := unsafe.Add(unsafe.Pointer(unsafe.SliceData(base)), -int(uintptr(unsafe.Pointer(unsafe.SliceData(base)))-h.M.Base()))
			span := int64(h.M.Size()) + 2*spec.SuperblockSize
			off := (offset%span+span)%span - spec.SuperblockSize
			if heapBackend && (off < 0 || off >= int64(h.M.Size())) {
				off = (off%int64(h.M.Size()) + int64(h.M.Size())) % int64(h.M.Size())
			}
			b = unsafe.Slice((*byte)(unsafe.Add(start, off)), 1)
		case 1: // near a live object: interior, just before, just after
			o := h.Object(live[rng.IntN(len(live))])
			delta := int(offset % int64(spec.SuperblockSize))
			if heapBackend {
				delta = int(uint64(offset) % uint64(cap(o)))
			}
			b = unsafe.Slice((*byte)(unsafe.Add(unsafe.Pointer(unsafe.SliceData(o)), delta)), 1)
		case 2: // an object freed before, maybe misaligned
			o := freed[rng.IntN(len(freed))]
			delta := int(uint64(offset) % uint64(cap(o)))
			b = unsafe.Slice((*byte)(unsafe.Add(unsafe.Pointer(unsafe.SliceData(o)), delta)), 1)
		case 3: // the Go heap
			g := make([]byte, 64+int(uint64(offset)%4096))
			b = g[uint64(offset)%uint64(len(g)):]
		}
		id := []int{c, d, invariants.Front}[rng.IntN(3)]
		before := h.A.Snapshot()
		if err := h.FreeSlice(id, b); err != nil {
			t.Fatal(err)
		}
		// FREE-INVALID, FREE-DOUBLE: a refusal changes nothing (the harness
		// checks an invalid one itself), a double free included, except that
		// one into an orphan may adopt it (FREE-DOUBLE).
		if h.LastErr != nil && !(errors.Is(h.LastErr, impl.ErrDoubleFree) && orphanAt(before, b)) {
			if diff := invariants.RefusalDiff(before, h.A.Snapshot()); diff != "" {
				t.Fatalf("a rejected free (%v) changed the state:\n%s", h.LastErr, diff)
			}
		}
		if err := h.FreeAll(); err != nil {
			t.Fatal(err)
		}
	})
}

// orphanAt reports whether b starts in an orphan in s.
func orphanAt(s *impl.Snapshot, b []byte) bool {
	st := invariants.SuperblockAt(s, uintptr(unsafe.Pointer(unsafe.SliceData(b))))
	return st != nil && st.Orphan
}

// FuzzMachine is the rapid state machine (invariants.RunMachine) driven by the
// fuzzer's bytes.
func FuzzMachine(f *testing.F) {
	f.Fuzz(rapid.MakeFuzz(invariants.RunMachine))
}
