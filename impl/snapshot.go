// Snapshot: a read-only copy of the internal state, for the invariant checker.

package impl

import (
	"sort"

	"github.com/refalloc/refalloc/internal/mutant"
	"github.com/refalloc/refalloc/spec"
)

// SBState is the state of a superblock in a Snapshot.
type SBState int

const (
	SBUnused SBState = iota
	SBPool
	SBSmall
	SBLargeHead
	SBLargeTail
	SBGuard      // a live guarded small object at its start (GUARD-FAULT)
	SBQuarantine // part of a freed guarded object in quarantine
)

func (s SBState) String() string {
	return [...]string{"unused", "pool", "small", "large-head", "large-tail", "guard", "quarantine"}[s]
}

// Snapshot is a copy of the allocator's internal state, the input of the
// abstraction function of package invariants (REFINES). Take it only when no
// other goroutine is using the Allocator or its caches (a quiescent point that the
// caller has synchronized with, e.g. after a WaitGroup).
type Snapshot struct {
	Base, Size     uintptr // the reservation
	SuperblockSize int
	PublishBatch   int // the STATS-LAG batch: bound on a superblock's LocalFreed
	Ways           int // entries of each cache's superblock cache
	Retain         int // bytes of empty superblocks the pool keeps committed
	// Decay is how long, in ns, superblocks past Retain stay committed (0: not
	// at all); Now is the time of the snapshot on the allocator's clock.
	Decay, Now int64
	// TimerFired counts the decay timer's firings. The timer runs on its own
	// goroutine: a checker comparing two snapshots around a call excuses what
	// it returned to the OS in between when this changed (MEM-ACCOUNT).
	TimerFired  uint64
	Stats       Stats
	Superblocks []SuperblockState // every header ever used, by index
	Caches      []CacheState      // the open caches, by ID
	Large       []LargeObject     // live large objects, by address
	FreeRuns    []Run             // the pool, by start
	// Orphans are the central lists of orphaned superblocks, by class, in list
	// order (a list that does not end within the number of superblocks is cut
	// there: a cycle).
	Orphans [][]int
	// OrphanNotify is the notification stack of orphans, from its head (cut
	// like Orphans).
	OrphanNotify []int
	// Retired are the counters closed caches left to the Allocator.
	Retired CacheCounters
	// Guard is guard mode's configuration and quarantine.
	Guard GuardState
}

// GuardState is guard mode in a Snapshot (GUARD-FAULT).
type GuardState struct {
	Enabled bool
	// Protects: freed guarded memory is inaccessible (false under the
	// Go-heap backend, where it is poisoned).
	Protects bool
	// SampleRate is the rate small allocations are sampled at, 0 when not.
	SampleRate int
	// The quarantine's bounds, and the quarantine, oldest first.
	QuarantineBytes, QuarantineObjects int
	Quarantine                         []Quarantined
}

// Quarantined is a freed guarded object in quarantine.
type Quarantined struct {
	Addr        uintptr
	Superblocks int
	Class       int // small class, or spec.Large
	Usable      int
	// Stuck: the kernel refused to make its memory accessible again when the
	// quarantine last tried to release it (vm.max_map_count), or after it
	// refused partway to protect it: it stays, and an out-of-memory error may
	// leave it there (OOM-REAL).
	Stuck bool
}

// CacheCounters are the event counters a cache publishes.
type CacheCounters struct {
	DoubleFrees, InvalidFrees, WriteAfterFrees uint64
	// SuperblockCacheMisses are the misses published; UnpublishedMisses those
	// counted on the free path but not yet added (fewer than a batch).
	SuperblockCacheMisses, UnpublishedMisses uint64
}

// SuperblockState is one superblock header.
type SuperblockState struct {
	Index int
	Addr  uintptr
	State SBState
	Gen   uint32
	// Class is the size class (small, guard), or the class of its last small
	// life (pool; spec.Large after a large object), or -1; for a quarantined
	// head, the freed object's class or spec.Large.
	Class int
	// GuardSlot: it holds a guarded small object of class Class at its start
	// (guard), or its last life was one (quarantine, pool): a free of its
	// start is that object's, and nothing else starts there.
	GuardSlot bool
	// Owner is the owning cache's ID; -1 for an orphan or when not small.
	Owner  int
	Orphan bool
	Dirty  bool // used since it was last fresh (counted in Stats.Committed)
	// PooledAt is when a pooled superblock entered the pool dirty.
	PooledAt int64
	Current  bool // the current superblock of its class in its owner
	// List is the list a small superblock's header says it is on: "current",
	// "partial", "full", "orphan" or "none"; "" in the other states (pool,
	// large, guard, quarantine).
	List    string
	Objects int
	// Free and Pending are the free bitmap and the pending remote frees, one
	// word per 32 objects. RemoteTags are the generation tags of the remote words.
	Free, Pending []uint32
	RemoteTags    []uint32
	NFree         int // set bits of Free, minus LocalFreed
	LocalFreed    int // local frees not yet published (STATS-LAG)
	// Notified: on (or being pushed onto) a notification stack.
	Notified bool
	// Live is the impl's own count of live objects (not free, held, or pending);
	// the invariant checker recomputes it.
	Live int
}

// CacheState is one open cache.
type CacheState struct {
	ID    int
	Front bool // the Allocator's internal cache
	// Token is a per-P cache's token (FRONT-EXCLUSIVE): 0 unless a call holds
	// it; Users the calls counted in it (refalloc_check and refalloc_yield
	// builds only).
	Token   uint32
	Users   int32
	Held    []HeldGroup
	Current []int // current superblock index per class, -1 when none
	Entries []Entry
	// Published counters per class, and the events this cache counted.
	Allocs, Frees []uint64
	CacheCounters
	// Partial and Full are the owned superblocks that are not current, by
	// class, in list order (cut like Snapshot.Orphans).
	Partial, Full [][]int
	// Notify is the cache's notification stack, from its head.
	Notify []int
}

// HeldGroup is a class's held group: objects taken from a superblock, not yet
// handed out (the "Held" of STATS-LEAD).
type HeldGroup struct {
	Class      int
	Superblock int
	Group      int
	Bits       uint32
}

// Entry is one valid superblock-cache entry (CACHE-COHERENT).
type Entry struct {
	Way        int
	Superblock int
	Class      int
	Size       uint32
	Magic      uint32
	Objects    uint32
	Gen        uint32
	Mine       bool
	// SameRemote reports whether the entry's remote words are the header's
	// current remote set.
	SameRemote bool
	// SameFree reports whether the entry's free bitmap is the header's (a
	// mine entry's; the others keep none).
	SameFree bool
}

// LargeObject is a live large object.
type LargeObject struct {
	Addr        uintptr
	Usable      int
	Superblocks int
}

// Run is a run of free superblocks in the pool.
type Run struct{ Start, N int }

// ID is the cache's number, as Snapshot's CacheState.ID names it.
func (c *Cache) ID() int { return c.id }

// Snapshot copies the internal state. Quiescent callers only (see Snapshot).
func (a *Allocator) Snapshot() *Snapshot { return a.snapshot() }

func (a *Allocator) snapshot() *Snapshot {
	s := &Snapshot{
		Base: a.base, Size: a.size, SuperblockSize: spec.SuperblockSize,
		PublishBatch: publishBatch, Ways: a.ways, Stats: a.Stats(), Retain: a.retain << (spec.SuperblockShift * (1 - b2i(mutant.SnapRetainCount))),
		Decay: a.decay, Now: a.now(),
	}
	if mutant.SnapNoNow { // MEM-ACCOUNT: the decay check compares Now with PooledAt
		s.Now = 0
	}
	caches := a.openCaches()
	yield(YieldSnapshotLock)
	a.lock()
	defer a.mu.Unlock()
	if !mutant.SnapStatsEarly {
		// MEM-ACCOUNT: the central counts of the instant the headers are
		// read. The decay timer, on its own goroutine, may have returned
		// superblocks to the OS since Stats read them.
		a.centralStats(&s.Stats)
	}
	s.TimerFired = a.fired
	for _, r := range a.runs {
		s.FreeRuns = append(s.FreeRuns, Run{int(r.start), int(r.n)})
	}
	held := heldGroups(caches)
	for ci := range a.top {
		ch := a.top[ci].Load()
		if ch == nil {
			continue
		}
		for j := range ch {
			if mutant.SnapChunkLast && j == len(ch)-1 {
				continue
			}
			sb := &ch[j]
			gen, state, k := unpackMeta(sb.meta.Load())
			if state == stateUnused {
				continue
			}
			st := SuperblockState{
				Index: int(sb.idx), Addr: a.base + uintptr(sb.idx)<<spec.SuperblockShift,
				State: SBState(state), Gen: gen, Class: -1, Owner: -1, Dirty: sb.dirty,
				Notified: sb.notified.Load(), PooledAt: sb.pooledAt,
			}
			if mutant.SnapNoPooledAt { // MEM-ACCOUNT: the decay check reads PooledAt
				st.PooledAt = 0
			}
			switch g, guarded := isGuardMark(k); {
			case k < spec.NumClasses:
				st.Class = int(k)
			case k == largeMark:
				st.Class = spec.Large
			case guarded:
				st.Class, st.GuardSlot = g, true
			}
			if state == stateGuard {
				st.GuardSlot, st.Objects, st.Live = true, 1, 1
			}
			if state == stateLargeHead {
				s.Large = append(s.Large, LargeObject{Addr: st.Addr, Usable: int(sb.usable), Superblocks: int(sb.runLen)})
			}
			if state == stateSmall {
				a.snapSmall(&st, sb, held[sb])
			}
			s.Superblocks = append(s.Superblocks, st)
		}
	}
	for _, c := range caches {
		s.Caches = append(s.Caches, c.snapshot(c.front))
	}
	s.OrphanNotify = a.walkNotify(a.orphanNotify.Load())
	if mutant.SnapNoOrphanNotify { // CONSERVE: a notified orphan on no stack is a lost notification
		s.OrphanNotify = nil
	}
	s.Orphans = make([][]int, spec.NumClasses)
	for k := range s.Orphans {
		s.Orphans[k] = a.walk(a.orphans[k])
	}
	a.regMu.Lock()
	r := a.retired
	a.regMu.Unlock()
	s.Retired = CacheCounters{DoubleFrees: r.double, InvalidFrees: r.invalid, WriteAfterFrees: r.waf, SuperblockCacheMisses: r.sbcFills}
	s.Guard = a.snapGuard()
	return s
}

// walkNotify lists a notification stack from head, cut like walk.
func (a *Allocator) walkNotify(head *superblock) []int {
	var out []int
	for sb := head; sb != nil && (sb != closedStack || mutant.SnapWalksSealed) && len(out) <= int(a.nsb); sb = sb.nextNotify.Load() { // CONSERVE: a sealed stack holds nothing
		out = append(out, int(sb.idx))
	}
	return out
}

// walk lists a superblock list from head, at most as many as there are
// superblocks (more would be a cycle).
func (a *Allocator) walk(head *superblock) []int {
	var out []int
	for sb := head; sb != nil && len(out) <= int(a.nsb); sb = sb.next {
		out = append(out, int(sb.idx))
	}
	return out
}

func (a *Allocator) snapSmall(st *SuperblockState, sb *superblock, held heldGroup) {
	if o := sb.owner.Load(); o != nil {
		st.Owner = o.id
		st.Current = sb.list == listCurrent
	}
	st.List = [...]string{"none", "partial", "full", "orphan", "current"}[sb.list]
	st.Orphan = sb.list == listOrphan
	st.Objects = int(sb.objects())
	st.Free = append([]uint32(nil), sb.free...)
	st.Pending, st.RemoteTags = make([]uint32, len(sb.free)), make([]uint32, len(sb.free))
	rs := sb.remote.Load()
	for g := range sb.free {
		w := rs.w[g].Load()
		st.Pending[g], st.RemoteTags[g] = uint32(w), uint32(w>>32)
	}
	st.NFree, st.LocalFreed = int(sb.nfree), int(sb.localFreed)
	for g := range st.Free {
		st.Live += int(popcount(liveBits(st, held, g)))
	}
}

// liveBits is the impl's own view of the live objects of group g: neither free,
// held (by held, the owner's held group, if any) nor pending.
func liveBits(st *SuperblockState, held heldGroup, g int) uint32 {
	notLive := st.Free[g] | st.Pending[g]
	if int(held.group) == g {
		notLive |= held.bits
	}
	valid := uint32(1<<32 - 1)
	if rest := st.Objects - 32*g; rest < 32 {
		valid = 1<<rest - 1
	}
	return valid &^ notLive
}

// heldGroup is a copy of a held group's objects: a copy, so that what Close
// keeps for Leaks (liveAtClose) does not depend on the caches after Close.
// The zero value holds nothing.
type heldGroup struct {
	group int32
	bits  uint32
}

// heldGroups maps each superblock to the held group taken from it, if any.
func heldGroups(caches []*Cache) map[*superblock]heldGroup {
	held := map[*superblock]heldGroup{}
	for _, c := range caches {
		for k := range spec.NumClasses {
			if cc := &c.cls[k]; cc.bits != 0 {
				held[cc.sb] = heldGroup{group: cc.group, bits: cc.bits}
			}
		}
	}
	return held
}

// openCaches returns the registered caches, by ID.
func (a *Allocator) openCaches() []*Cache {
	a.regMu.Lock()
	caches := make([]*Cache, 0, len(a.caches))
	for c := range a.caches {
		caches = append(caches, c)
	}
	a.regMu.Unlock()
	sort.Slice(caches, func(i, j int) bool {
		if mutant.SnapCachesDesc { // STATS-EXACT: Snapshot.Caches by descending ID
			return caches[i].id > caches[j].id
		}
		return caches[i].id < caches[j].id
	})
	return caches
}

func (c *Cache) snapshot(front bool) CacheState {
	cs := CacheState{
		ID: c.id, Front: front, Token: c.busy.Load() * uint32(1-b2i(mutant.SnapNoToken)), Users: c.users.Load() * int32(1-b2i(mutant.SnapNoUsers)),
		CacheCounters: CacheCounters{
			DoubleFrees: c.ev.double.Load(), InvalidFrees: c.ev.invalid.Load(), WriteAfterFrees: c.ev.waf.Load(),
			SuperblockCacheMisses: c.ev.sbcFills.Load(), UnpublishedMisses: uint64(c.misses),
		},
		Current: make([]int, spec.NumClasses), Allocs: make([]uint64, spec.NumClasses), Frees: make([]uint64, spec.NumClasses),
		Partial: make([][]int, spec.NumClasses), Full: make([][]int, spec.NumClasses),
	}
	for k := range spec.NumClasses {
		cc := &c.cls[k]
		cs.Current[k] = -1
		if cc.sb != nil {
			cs.Current[k] = int(cc.sb.idx)
		}
		if cc.bits != 0 {
			cs.Held = append(cs.Held, HeldGroup{Class: k, Superblock: int(cc.sb.idx), Group: int(cc.group), Bits: cc.bits})
		}
		cs.Allocs[k], cs.Frees[k] = c.pub[k].allocs.Load(), c.pub[k].frees.Load()
		if mutant.SnapAllocsFrees { // STATS-EXACT: the cache's counters swapped
			cs.Allocs[k], cs.Frees[k] = cs.Frees[k], cs.Allocs[k]
		}
		cs.Partial[k], cs.Full[k] = c.a.walk(c.lists[k].partial), c.a.walk(c.lists[k].full)
	}
	cs.Notify = c.a.walkNotify(c.notify.Load())
	for w := 0; w <= int(c.wayMask); w++ {
		e := &c.sbc[w]
		if e.key == noKey {
			continue
		}
		same := false
		if rs := e.sb.remote.Load(); e.rw != nil && len(rs.w) > 0 {
			same = (e.rw == &rs.w[0] || mutant.SnapRemotePtr) && (mutant.SnapRemoteLen || e.nrw == uint32(len(rs.w)))
		}
		sameFree := e.free != nil && len(e.sb.free) > 0 && e.free == &e.sb.free[0]
		cs.Entries = append(cs.Entries, Entry{
			Way: w, Superblock: int(e.tag()), Class: int(e.class), Size: e.size, Magic: e.magic,
			Objects: e.nobj, Gen: e.gen, Mine: e.mine(), SameRemote: same, SameFree: sameFree,
		})
	}
	return cs
}
