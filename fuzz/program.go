// Package fuzz holds refalloc's native Go fuzz targets and the program format
// they decode bytes into.
//
// A program is a header byte (the reservation size, the superblock-cache ways,
// debug mode) followed by fixed-size commands of CmdSize bytes: op (its low
// four bits), cache, size (two bytes), align, victim (two bytes), flags.
// Unknown opcodes (15) are skipped and trailing bytes ignored, the shape of
// Go's own map fuzz test, so that every input is a valid program and the fuzzer
// is never boxed in. Encode and Decode are inverse on programs of known opcodes
// (TestProgramRoundTrip).
package fuzz

import (
	"encoding/binary"
	"fmt"

	"github.com/refalloc/refalloc/impl"
	"github.com/refalloc/refalloc/internal/mutant"
	"github.com/refalloc/refalloc/invariants"
	"github.com/refalloc/refalloc/spec"
)

// CmdSize is the size of one encoded command.
const CmdSize = 8

// MaxCmds bounds a program, so that one input stays fast enough to fuzz.
const MaxCmds = 256

// Op is a command's operation.
type Op uint8

const (
	OpAlloc        Op = iota // Alloc(size) on a cache
	OpAllocAligned           // AllocAligned(size, 1<<align)
	OpFreeLocal              // free a live object on the cache that allocated it
	OpFreeCross              // free a live object on another cache
	OpFreeBad                // a bad free of kind align%NumBad
	OpFlush                  // flush a cache
	OpFlushAll               // flush every cache, check STATS-EXACT
	OpCloseCache             // close a cache
	OpNewCache               // open a cache
	OpAllocBad               // negative, too large, or badly aligned
	OpUseClosed              // call a closed cache
	OpRealloc                // Realloc: of whom and to what, by flags (reallocCmd)
	OpFreeTail               // free at a live object's superblock tail (align bit 0: the last object's last byte)
	OpAllocator              // the Allocator's methods, by align%5: Stats, Leaks, Trim, Flush, and a fault explained (touchFreed)
	OpAllocEdge              // Alloc (flags bit 2: AllocAligned) of an edge size (invariants.EdgeSizes)
	NumOps
)

var opNames = [...]string{"alloc", "allocAligned", "freeLocal", "freeCross", "freeBad", "flush", "flushAll", "closeCache", "newCache", "allocBad", "useClosed",
	"realloc", "freeTail", "allocator", "allocEdge"}

func (o Op) String() string {
	if o < NumOps {
		return opNames[o]
	}
	return fmt.Sprintf("op(%d)", uint8(o))
}

// Cmd is one command, its fields as encoded; Run gives them meaning.
type Cmd struct {
	Op     Op
	Cache  uint8
	Size   uint16
	Align  uint8
	Victim uint16
	Flags  uint8
}

// Program is a header and commands.
type Program struct {
	// Header: bits 0-1: a reservation of 16<<n superblocks; bits 4-5: 16, 8,
	// 32 or 1 superblock-cache ways, or with bit 2: 1, 64, 128 or 64 (bit 2
	// alone was one way before bits 4-5 said anything); bit 3: debug mode; bit 6: guard mode
	// (GUARD-FAULT) with every small allocation sampled, or, with bit 7, one
	// in 3 and a quarantine of one object; bit 7 without guard mode: a pool
	// that keeps two superblocks committed and returns the rest at once
	// (Retain, Decay < 0: MEM-ACCOUNT is then checked tightly at every step).
	Header uint8
	Cmds   []Cmd
}

// Decode reads a program: header byte, then whole commands, at most MaxCmds;
// unknown opcodes are skipped, trailing bytes ignored. An empty input is an
// empty program.
func Decode(data []byte) Program {
	var p Program
	if len(data) == 0 {
		return p
	}
	p.Header, data = data[0], data[1:]
	limit := MaxCmds
	if mutant.ProgMaxCmds {
		limit = MaxCmds / 2
	}
	for ; len(data) >= CmdSize && len(p.Cmds) < limit; data = data[CmdSize:] {
		c := Cmd{
			Op:     Op(data[0] & 0x0f),
			Cache:  data[1],
			Size:   binary.LittleEndian.Uint16(data[2:]),
			Align:  data[4],
			Victim: binary.LittleEndian.Uint16(data[5:]),
			Flags:  data[7],
		}
		if c.Op < NumOps {
			p.Cmds = append(p.Cmds, c)
		}
	}
	return p
}

// Encode writes a program in the format Decode reads.
func Encode(p Program) []byte {
	out := []byte{p.Header}
	for _, c := range p.Cmds {
		var b [CmdSize]byte
		b[0], b[1] = byte(c.Op), c.Cache
		binary.LittleEndian.PutUint16(b[2:], c.Size)
		b[4] = c.Align
		binary.LittleEndian.PutUint16(b[5:], c.Victim)
		b[7] = c.Flags
		out = append(out, b[:]...)
	}
	return out
}

// Options is the allocator configuration a header selects.
func (p Program) Options() impl.Options {
	ways := [4]int{16, 8, 32, 1}[p.Header>>4&3]
	if p.Header&4 != 0 {
		ways = [4]int{1, 64, 128, 64}[p.Header>>4&3]
		if mutant.ProgWays128 {
			ways = [4]int{1, 64, 64, 64}[p.Header>>4&3]
		}
	}
	reserve := p.Header & 3
	if mutant.ProgReserveNarrow {
		reserve = p.Header & 1
	}
	opt := impl.Options{Reserve: (16 << reserve) * spec.SuperblockSize, SuperblockCacheWays: ways, Debug: p.Header&8 != 0}
	if p.Header&64 != 0 {
		opt.Guard = impl.GuardOptions{Enabled: true, SampleRate: 1}
		if p.Header&128 != 0 {
			opt.Guard.SampleRate, opt.Guard.QuarantineObjects = 3, 1
		}
	} else if p.Header&128 != 0 && !mutant.ProgRetain {
		opt.Retain, opt.Decay = 2*spec.SuperblockSize, -1
	}
	return opt
}

// size gives a command's size: Flags bits 0-1 choose the range (tiny, small,
// any small class, large), so every range is a byte away.
func (c Cmd) size() int {
	switch c.Flags & 3 {
	case 0:
		return int(c.Size) % 257
	case 1:
		return int(c.Size) % 4097
	case 2:
		if mutant.ProgSizeMaxSmall {
			return int(c.Size) % spec.MaxSmall
		}
		return int(c.Size) % (spec.MaxSmall + 1)
	}
	return spec.MaxSmall + 1 + int(c.Size)*4
}

// Run executes p against an Allocator and the Model through a Harness that runs
// every invariant after every command, then frees everything (EMPTY) and closes
// the Allocator with nothing leaked. It returns the first violation.
func Run(p Program) error {
	h, err := invariants.NewHarness(p.Options())
	if err != nil {
		return err
	}
	defer h.Close()
	h.CheckEachStep = !mutant.ProgCheckEach
	for range 3 {
		if _, err := h.NewCache(); err != nil {
			return err
		}
	}
	for i, c := range p.Cmds {
		if err := step(h, c); err != nil {
			return fmt.Errorf("command %d (%v %+v): %w", i, c.Op, c, err)
		}
	}
	if err := h.FreeAll(); err != nil {
		return fmt.Errorf("after the program: %w", err)
	}
	return h.Close()
}

// cache picks an open cache, or Front, by sel.
func cache(h *invariants.Harness, sel uint8) int {
	ids := h.Caches()
	n := len(ids) + 1
	if mutant.ProgNoFront {
		n = len(ids)
	}
	if i := int(sel) % n; i < len(ids) {
		return ids[i]
	}
	return invariants.Front
}

// observe, if set (tests), is told of each call a command makes, with the
// harness, before it is made: what the decoder reached.
var observe func(h *invariants.Harness, o observed)

// observed is one call a command made: its op, what it called, on which cache
// (for a free, also the object's owner), with which size and alignment.
type observed struct {
	Op              Op
	Call            string
	ID, Owner, N, A int
}

func note(h *invariants.Harness, o observed) {
	if observe != nil {
		observe(h, o)
	}
}

func step(h *invariants.Harness, c Cmd) error {
	id := cache(h, c.Cache)
	live := h.Live()
	switch c.Op {
	case OpAlloc:
		note(h, observed{Op: c.Op, Call: "alloc", ID: id, N: c.size(), A: 1})
		return h.Alloc(id, c.size(), 1)
	case OpAllocAligned:
		shift := c.Align % (spec.SuperblockShift + 1)
		if mutant.ProgAlignSB {
			shift = c.Align % spec.SuperblockShift
		}
		note(h, observed{Op: c.Op, Call: "alloc", ID: id, N: c.size(), A: 1 << shift})
		return h.Alloc(id, c.size(), 1<<shift)
	case OpFreeLocal, OpFreeCross:
		if len(live) == 0 {
			return nil
		}
		a := live[int(c.Victim)%len(live)]
		owner := h.Owner(a)
		if h.Cache(owner) == nil {
			owner = invariants.Front
		}
		if c.Op == OpFreeCross && id == owner && !mutant.ProgCrossLocal {
			id = cache(h, c.Cache+1)
		}
		if c.Op == OpFreeLocal {
			id = owner
		}
		note(h, observed{Op: c.Op, Call: "free", ID: id, Owner: owner})
		return h.Free(id, a)
	case OpFreeBad:
		kind := int(c.Align) % invariants.NumBad
		if mutant.ProgBadKinds {
			kind = int(c.Align) % (invariants.NumBad - 1)
		}
		// The flags are bits 16 to 23 of the pick: an interior free reaches
		// past a large object's first superblock.
		pick := int(c.Victim) | int(c.Flags)<<16
		if mutant.ProgBadPickNarrow { // FREE-INVALID: the victim's 16 bits alone
			pick = int(c.Victim)
		}
		note(h, observed{Op: c.Op, Call: "free bad", ID: id, N: kind, A: pick})
		return h.FreeBad(id, kind, pick)
	case OpFlush:
		return h.Flush(id)
	case OpFlushAll:
		return h.FlushAll()
	case OpCloseCache:
		if id != invariants.Front && len(h.Caches()) > 1 {
			return h.CloseCache(id)
		}
	case OpNewCache:
		if len(h.Caches()) < 6-3*b2i(mutant.ProgNewCacheNever) {
			_, err := h.NewCache()
			return err
		}
	case OpAllocBad:
		n, align := -1-int(c.Size), 1
		switch c.Align % uint8(3-b2i(mutant.ProgBadAlignNever)) {
		case 1:
			n = spec.MaxAlloc + 1 + int(c.Size)
		case 2:
			n, align = int(c.Size)%100, 3+2*int(c.Victim%100)
		}
		note(h, observed{Op: c.Op, Call: "alloc bad", ID: id, N: n, A: align})
		return h.Alloc(id, n, align)
	case OpUseClosed:
		closed := closedIDs(h)
		if len(closed) == 0 {
			return nil
		}
		cid := closed[int(c.Victim)%len(closed)]
		if c.Align&1 == 0 || len(live) == 0 || mutant.ProgClosedFree {
			note(h, observed{Op: c.Op, Call: "alloc closed", ID: cid})
			return h.Alloc(cid, c.size(), 1)
		}
		note(h, observed{Op: c.Op, Call: "free closed", ID: cid})
		return h.Free(cid, live[int(c.Victim)%len(live)])
	case OpRealloc:
		return reallocCmd(h, c, id, live)
	case OpFreeTail:
		if len(live) == 0 {
			return nil
		}
		last := c.Align&1 != 0 && !mutant.ProgTailLast
		o := observed{Op: c.Op, Call: "free tail", ID: id}
		if last {
			o.N = 1
		}
		note(h, o)
		return h.FreeTail(id, live[int(c.Victim)%len(live)], last)
	case OpAllocator:
		k := c.Align % 5
		if mutant.ProgTouchQ {
			k = c.Align % 4
		}
		switch k {
		case 0:
			note(h, observed{Op: c.Op, Call: "stats"})
			return h.Stats()
		case 1:
			if mutant.ProgLeaksAsStats { // REFINES: Allocator.Leaks never called
				return h.Stats()
			}
			note(h, observed{Op: c.Op, Call: "leaks"})
			return h.Leaks()
		case 2:
			note(h, observed{Op: c.Op, Call: "trim"})
			return h.Trim()
		case 4:
			// GUARD-FAULT: read or write a freed object in quarantine; it must
			// fault, and Explain name it.
			note(h, observed{Op: c.Op, Call: "touch"})
			return h.TouchQuarantined(int(c.Victim)|int(c.Size)<<16, c.Flags&4 != 0)
		}
		note(h, observed{Op: c.Op, Call: "flush front"})
		return h.Flush(invariants.Front)
	case OpAllocEdge:
		edges := invariants.EdgeSizes(int(h.M.Size()))
		align := 1
		if c.Flags&4 != 0 && !mutant.ProgEdgeAlign {
			align = 1 << (c.Align % (spec.SuperblockShift + 1))
		}
		note(h, observed{Op: c.Op, Call: "alloc", ID: id, N: edges[int(c.Size)%len(edges)], A: align})
		return h.Alloc(id, edges[int(c.Size)%(len(edges)-b2i(mutant.ProgEdgeLastNever))], align)
	}
	return nil
}

// reallocCmd: flags bits 2-3 say whose object and who resizes it: a live one
// on its owner, on the command's cache (often another: it moves) or on the
// Allocator, or (3) a slice that is not a live object, of bad kind
// align%NumBad (a freed object, an interior or foreign pointer; nil is
// Alloc). Flags bit 4: the new size is one of the object's edges
// (invariants.ReallocSizes), picked by size; else the command's size. Flags
// bit 5: resize the result back to the object's old size, so that an object
// shrinks and grows back (in place, when its class or pages allow).
func reallocCmd(h *invariants.Harness, c Cmd, id int, live []uintptr) error {
	mode := c.Flags >> 2 & 3
	if mode == 3 || len(live) == 0 {
		kind := int(c.Align) % (invariants.NumBad - b2i(mutant.ProgReallocBadNoWild)) // FREE-DOUBLE: every kind, the wild one too
		note(h, observed{Op: c.Op, Call: "realloc bad", ID: id, N: kind})
		return h.ReallocBad(id, kind, int(c.Victim), func(capacity int) int {
			if c.Flags&16 != 0 && capacity > 0 {
				return capacity - int(c.Size)%2 // the stale object's own class
			}
			return c.size()
		})
	}
	a := live[int(c.Victim)%len(live)]
	switch mode {
	case 0:
		if mutant.ProgReallocNotOwner {
			break
		}
		if id = h.Owner(a); h.Cache(id) == nil {
			id = invariants.Front
		}
	case 2:
		if !mutant.ProgReallocFront {
			id = invariants.Front
		}
	}
	o, _ := h.M.LiveAt(a)
	n := c.size()
	if c.Flags&16 != 0 {
		edges := invariants.ReallocSizes(o)
		n = edges[int(c.Size)%len(edges)]
	}
	note(h, observed{Op: c.Op, Call: "realloc", ID: id, Owner: o.Cache, N: int(mode)})
	if err := h.Realloc(id, a, n); err != nil || h.LastErr != nil || c.Flags&32 == 0 || mutant.ProgReallocBack {
		return err
	}
	note(h, observed{Op: c.Op, Call: "realloc back", ID: id, N: o.Size})
	return h.Realloc(id, h.LastAddr, o.Size)
}

// b2i is 1 for true.
func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

func closedIDs(h *invariants.Harness) []int {
	open := map[int]bool{}
	for _, id := range h.Caches() {
		open[id] = true
	}
	var ids []int
	for _, id := range h.AllIDs() {
		if !open[id] {
			ids = append(ids, id)
		}
	}
	return ids
}
