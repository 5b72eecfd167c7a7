// Package invariants relates the allocator (a Snapshot of impl) to the model
// (package oracle) and to itself.
//
// Abstract is the abstraction function: from a Snapshot, the live objects it
// implies, compared with the model's by cmp.Diff (REFINES). Check runs that and
// every structural rule over a Snapshot: CONSERVE, STATS-LEAD with the held
// counts, STATS-LAG with the unpublished counts, CACHE-COHERENT over every entry
// of every cache, NO-OVERLAP, ALIGN, and the bad-free accounting. CheckEmpty adds
// EMPTY, CheckOOM adds OOM-REAL, and ExpectFree predicts from a Snapshot the exact
// outcome of a free. Every check returns violations naming a rule ID.
//
// How to add an invariant: write a func(*impl.Snapshot, *oracle.Model) []*Violation
// here, name its rule (add the ID to spec/SPEC.md and spec.Rule...), call it from
// Check, and give it a test in invariants_test.go that breaks a snapshot on purpose
// and expects that rule.
package invariants

import (
	"errors"
	"fmt"
	"maps"
	"math/bits"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/refalloc/refalloc/impl"
	"github.com/refalloc/refalloc/internal/mutant"
	"github.com/refalloc/refalloc/oracle"
	"github.com/refalloc/refalloc/spec"
)

// Violation is a broken rule (the oracle's type, so both read alike).
type Violation = oracle.Violation

func violation(rule, format string, args ...any) *Violation {
	return &Violation{Rule: rule, Detail: fmt.Sprintf(format, args...)}
}

// Kind maps an error from impl to the oracle's outcome kind.
func Kind(err error) oracle.Kind {
	switch {
	case err == nil:
		return oracle.OK
	case errors.Is(err, impl.ErrInvalidSize):
		return oracle.InvalidSize
	case errors.Is(err, impl.ErrTooLarge):
		return oracle.TooLarge
	case errors.Is(err, impl.ErrOutOfMemory):
		return oracle.OutOfMemory
	case errors.Is(err, impl.ErrDoubleFree):
		return oracle.DoubleFree
	case errors.Is(err, impl.ErrInvalidPointer):
		return oracle.InvalidPointer
	case errors.Is(err, impl.ErrClosed):
		return oracle.Closed
	}
	panic(fmt.Sprintf("invariants: an error that is no sentinel of impl: %v", err))
}

// StatsView is the part of impl.Stats the model predicts.
func StatsView(s impl.Stats) oracle.StatsView {
	var v oracle.StatsView
	for k, c := range s.Classes {
		v.Allocs[k], v.Frees[k] = c.Allocs, c.Frees
	}
	v.Large = oracle.Counts{Allocs: s.Large.Allocs, Frees: s.Large.Frees}
	v.LargeLiveBytes = s.Large.LiveBytes
	v.DoubleFrees, v.InvalidFrees = s.DoubleFrees, s.InvalidFrees
	v.Uncounted = !impl.ClassCounters
	return v
}

// small is a snapshot's view of one small superblock, with its held group.
type small struct {
	*impl.SuperblockState
	held *impl.HeldGroup
	hold int // the cache holding it
}

func (sb small) size() int { return spec.ClassSize(sb.Class) }

// valid is the mask of real objects in group g.
func (sb small) valid(g int) uint32 {
	if rest := sb.Objects - 32*g; rest < 32 {
		return 1<<rest - 1
	}
	return 1<<32 - 1
}

func (sb small) heldBits(g int) uint32 {
	if sb.held != nil && sb.held.Group == g {
		return sb.held.Bits
	}
	return 0
}

// live is the set of live objects of group g: neither free, held nor pending.
func (sb small) live(g int) uint32 {
	return sb.valid(g) &^ (sb.Free[g] | sb.Pending[g] | sb.heldBits(g))
}

// pendingFrees counts the remote frees pending in the superblock.
func (sb small) pendingFrees() int {
	n := 0
	for _, w := range sb.Pending {
		n += bits.OnesCount32(w)
	}
	return n
}

// badPending are pending remote frees of objects that are not live: remote
// double frees that the owner has yet to find.
func (sb small) badPending(g int) uint32 {
	return sb.Pending[g] & (sb.Free[g] | sb.heldBits(g))
}

// smalls indexes a snapshot's small superblocks with their held groups.
func smalls(s *impl.Snapshot) (map[int]small, []*Violation) {
	out := map[int]small{}
	var vs []*Violation
	for i := range s.Superblocks {
		if st := &s.Superblocks[i]; st.State == impl.SBSmall {
			out[st.Index] = small{SuperblockState: st, hold: -1}
		}
	}
	for _, c := range s.Caches {
		for i := range c.Held {
			h := &c.Held[i]
			sb, ok := out[h.Superblock]
			switch {
			case !ok:
				vs = append(vs, violation(spec.RuleConserve, "cache %d holds objects of superblock %d, which is not small", c.ID, h.Superblock))
				continue
			case sb.held != nil:
				vs = append(vs, violation(spec.RuleConserve, "superblock %d is held by caches %d and %d", h.Superblock, sb.hold, c.ID))
			}
			sb.held, sb.hold = h, c.ID
			out[h.Superblock] = sb
		}
	}
	return out, vs
}

// Abstract is the abstraction function: the live objects a snapshot implies,
// address → usable size.
func Abstract(s *impl.Snapshot) map[uintptr]int {
	sbs, _ := smalls(s)
	live := map[uintptr]int{}
	for _, sb := range sbs {
		for g := range sb.Free {
			for b := sb.live(g); b != 0; b &= b - 1 {
				idx := 32*g + bits.TrailingZeros32(b)
				live[sb.Addr+uintptr(idx*sb.size())] = sb.size()
			}
		}
	}
	for _, o := range s.Large {
		live[o.Addr] = o.Usable
	}
	for _, st := range s.Superblocks {
		if st.State == impl.SBGuard { // GUARD-FAULT: a guarded object is live like any other
			live[st.Addr] = spec.ClassSize(st.Class)
		}
	}
	return live
}

// Check runs every rule that holds at every quiescent point.
func Check(s *impl.Snapshot, m *oracle.Model) []*Violation {
	sbs, vs := smalls(s)
	vs = append(vs, refines(s, m)...)
	vs = append(vs, conserve(s, sbs)...)
	vs = append(vs, statsLead(s, sbs, m)...)
	vs = append(vs, statsLag(s, sbs, m)...)
	vs = append(vs, badFrees(s, sbs, m)...)
	vs = append(vs, statsFields(s, sbs)...)
	vs = append(vs, lifecycle(s, sbs)...)
	vs = append(vs, coherent(s, sbs)...)
	vs = append(vs, noOverlap(s)...)
	vs = append(vs, memAccount(s)...)
	vs = append(vs, guarded(s, m)...)
	vs = append(vs, frontIdle(s)...)
	// STATS-LEAD and STATS-LAG bounds, LARGE-EXACT, bad-free counts:
	vs = append(vs, m.CheckStats(StatsView(s.Stats), len(s.Caches), false)...)
	return vs
}

// frontIdle (FRONT-EXCLUSIVE): at a quiescent point no call is in flight, so
// no cache's token is held and no cache counts a call using it: a token left
// held would send every later call on its P to the shards, and hang Flush.
func frontIdle(s *impl.Snapshot) []*Violation {
	var vs []*Violation
	for _, c := range s.Caches {
		if c.Token != 0 || c.Users != 0 {
			vs = append(vs, violation(spec.RuleFrontExclusive, "cache %d: token %d and %d calls counted at a quiescent point", c.ID, c.Token, c.Users))
		}
	}
	return vs
}

// refines (REFINES): the snapshot's live objects are exactly the model's.
func refines(s *impl.Snapshot, m *oracle.Model) []*Violation {
	want := map[uintptr]int{}
	for _, o := range m.Live() {
		want[o.Addr] = o.Usable
	}
	got := Abstract(s)
	if maps.Equal(want, got) { // the common case, without cmp's reflection
		return nil
	}
	return []*Violation{violation(spec.RuleRefines, "live objects (-model +allocator):\n%s", cmp.Diff(want, got))}
}

// conserve (CONSERVE): every object of every superblock is in exactly one place
// (live, held by one cache, free in its superblock, or pending remote), the
// counts agree with the bitmaps, every superblock is in exactly one of the pool
// or a use, and every pending remote free is announced.
func conserve(s *impl.Snapshot, sbs map[int]small) []*Violation {
	var vs []*Violation
	open := map[int]bool{}
	for _, c := range s.Caches {
		open[c.ID] = true
		for k, cur := range c.Current {
			if sb, ok := sbs[cur]; cur >= 0 && (!ok || sb.Owner != c.ID || sb.Class != k && !mutant.ConserveCurrentClass || !sb.Current) {
				vs = append(vs, violation(spec.RuleConserve, "cache %d: current superblock %d of class %d is not its own", c.ID, cur, k))
			}
		}
	}
	for _, sb := range sbs {
		free := 0
		live := 0
		for g := range sb.Free {
			v := sb.valid(g)
			marked := sb.Free[g] | sb.Pending[g] | sb.heldBits(g)
			if mutant.PendingBeyond {
				marked = sb.Free[g] | sb.heldBits(g)
			}
			if marked&^v != 0 {
				vs = append(vs, violation(spec.RuleConserve, "superblock %d group %d: bits beyond its %d objects", sb.Index, g, sb.Objects))
			}
			both := sb.Free[g] & sb.heldBits(g)
			if mutant.FreeHeldFirstObj { // CONSERVE: object 0 of a group, free and held, passes
				both &^= 1
			}
			if both != 0 {
				vs = append(vs, violation(spec.RuleConserve, "superblock %d group %d: objects both free and held", sb.Index, g))
			}
			if sb.RemoteTags[g] != sb.Gen || sb.Gen == 1<<32-1 { // the tag of a retired set is no generation
				vs = append(vs, violation(spec.RuleCacheCoherent, "superblock %d group %d: remote tag %d, generation %d", sb.Index, g, sb.RemoteTags[g], sb.Gen))
			}
			free += bits.OnesCount32(sb.Free[g])
			live += bits.OnesCount32(sb.live(g))
			if sb.Pending[g] != 0 && !sb.Notified {
				vs = append(vs, violation(spec.RuleConserve, "superblock %d has pending remote frees nobody was told of", sb.Index))
			}
		}
		switch {
		case free != sb.NFree+sb.LocalFreed:
			vs = append(vs, violation(spec.RuleConserve, "superblock %d: %d free bits, counts say %d+%d", sb.Index, free, sb.NFree, sb.LocalFreed))
		case live != sb.Live:
			vs = append(vs, violation(spec.RuleConserve, "superblock %d: %d live objects, impl says %d", sb.Index, live, sb.Live))
		case sb.Orphan != (sb.Owner < 0):
			vs = append(vs, violation(spec.RuleConserve, "superblock %d: orphan %v with owner %d", sb.Index, sb.Orphan, sb.Owner))
		case sb.Owner >= 0 && !open[sb.Owner]:
			vs = append(vs, violation(spec.RuleConserve, "superblock %d is owned by cache %d, which is not open", sb.Index, sb.Owner))
		case sb.held != nil && sb.hold != sb.Owner && !(mutant.HeldOrphanOK && sb.Owner < 0): // CONSERVE: an orphan's held objects pass
			vs = append(vs, violation(spec.RuleConserve, "superblock %d is held by cache %d but owned by %d", sb.Index, sb.hold, sb.Owner))
		}
	}
	// Superblocks: the pool's runs and the used superblocks tile the reservation.
	used := map[int]bool{}
	quarantined := 0
	for _, st := range s.Superblocks {
		if inUse(st.State) {
			used[st.Index] = true
		}
		if st.State == impl.SBQuarantine {
			quarantined++
		}
	}
	for _, o := range s.Large {
		first := int((o.Addr - s.Base) / uintptr(s.SuperblockSize))
		for i := first; i < first+o.Superblocks; i++ {
			if !used[i] {
				vs = append(vs, violation(spec.RuleConserve, "large object %#x: superblock %d is not in use", o.Addr, i))
			}
		}
		if need := oracle.LargeSpan(o.Usable); need != o.Superblocks {
			vs = append(vs, violation(spec.RuleConserve, "large object %#x of %d bytes spans %d superblocks", o.Addr, o.Usable, o.Superblocks))
		}
	}
	vs = append(vs, NotifyStacks(s)...)
	// A superblock on a cache's stack is that cache's, or its remote frees
	// wait for a drain of a cache that may never drain again (an idle former
	// owner): a notify that finds the owner changed forwards the stack, and
	// so do an owner that orphans or releases a superblock it announced.
	bySB := map[int]*impl.SuperblockState{}
	for i := range s.Superblocks {
		bySB[s.Superblocks[i].Index] = &s.Superblocks[i]
	}
	for _, c := range s.Caches {
		for _, i := range c.Notify {
			if st := bySB[i]; st != nil && st.Owner != c.ID && !(mutant.StackOrphanPending && st.Owner < 0) && hasPending(st) {
				vs = append(vs, violation(spec.RuleLifecycle, "superblock %d (owner %d) has remote frees pending and is announced on the stack of cache %d, which is not its owner", i, st.Owner, c.ID))
			}
		}
	}
	total := int(s.Size / uintptr(s.SuperblockSize))
	pooled, end := 0, 0
	for i, r := range s.FreeRuns {
		if r.Start < end || r.N <= 0 {
			vs = append(vs, violation(spec.RuleConserve, "free runs overlap or are empty at %d", r.Start))
		}
		if i > 0 && r.Start == end {
			vs = append(vs, violation(spec.RuleConserve, "free runs at %d and %d touch and were not merged", s.FreeRuns[i-1].Start, r.Start))
		}
		for i := r.Start; i < r.Start+r.N; i++ {
			if used[i] {
				vs = append(vs, violation(spec.RuleConserve, "superblock %d is both pooled and in use", i))
			}
		}
		pooled += r.N
		end = r.Start + r.N
	}
	if pooled+len(used)+quarantined != total {
		vs = append(vs, violation(spec.RuleConserve, "%d pooled + %d used + %d quarantined superblocks, reservation has %d", pooled, len(used), quarantined, total))
	}
	return vs
}

// inUse reports whether a superblock in state st holds live objects, or can:
// small, large, or a guarded small object's (MEM-ACCOUNT: counted in InUse).
func inUse(st impl.SBState) bool {
	return st == impl.SBSmall || st == impl.SBLargeHead || st == impl.SBLargeTail || st == impl.SBGuard
}

// statsLead (STATS-LEAD): Allocs == true allocations + what the caches hold,
// and no cache holds more than a superblock's worth.
func statsLead(s *impl.Snapshot, sbs map[int]small, m *oracle.Model) []*Violation {
	var vs []*Violation
	var held [spec.NumClasses]uint64
	for _, c := range s.Caches {
		for _, h := range c.Held {
			n := bits.OnesCount32(h.Bits)
			if n > spec.ClassObjects(h.Class) || mutant.HeldBound && n == spec.ClassObjects(h.Class) {
				vs = append(vs, violation(spec.RuleStatsLead, "cache %d holds %d objects of class %d, more than a superblock's %d", c.ID, n, h.Class, spec.ClassObjects(h.Class)))
			}
			if sb, ok := sbs[h.Superblock]; ok && sb.Class != h.Class && !(mutant.HeldClassZero && h.Class == 0) { // STATS-LEAD: class-0 held groups pass
				vs = append(vs, violation(spec.RuleStatsLead, "cache %d holds class-%d objects from a class-%d superblock", c.ID, h.Class, sb.Class))
			}
			held[h.Class] += uint64(n)
		}
	}
	for k := range spec.NumClasses {
		if !impl.ClassCounters {
			break // CheckStats holds them to 0 (StatsView's Uncounted)
		}
		if got, want := s.Stats.Classes[k].Allocs, m.Counts(k).Allocs+held[k]; got != want {
			vs = append(vs, violation(spec.RuleStatsLead, "class %d: Allocs %d, want true %d + held %d", k, got, m.Counts(k).Allocs, held[k]))
		}
	}
	return vs
}

// statsLag (STATS-LAG): Frees + unpublished == true frees, where unpublished is
// each superblock's local frees (fewer than the batch) and its pending remote
// frees of live objects.
func statsLag(s *impl.Snapshot, sbs map[int]small, m *oracle.Model) []*Violation {
	var vs []*Violation
	var unpublished [spec.NumClasses]uint64
	for _, sb := range sbs {
		if sb.LocalFreed < 0 || sb.LocalFreed >= s.PublishBatch {
			vs = append(vs, violation(spec.RuleStatsLag, "superblock %d: %d unpublished local frees, batch is %d", sb.Index, sb.LocalFreed, s.PublishBatch))
		}
		pending := 0
		for g := range sb.Free {
			pending += bits.OnesCount32(sb.Pending[g] &^ sb.badPending(g))
		}
		unpublished[sb.Class] += uint64(sb.LocalFreed + pending)
	}
	for k := range spec.NumClasses {
		if !impl.ClassCounters {
			break // CheckStats holds them to 0 (StatsView's Uncounted)
		}
		if got, want := s.Stats.Classes[k].Frees+unpublished[k], m.Counts(k).Frees; got != want {
			vs = append(vs, violation(spec.RuleStatsLag, "class %d: Frees %d + unpublished %d, want true %d", k, s.Stats.Classes[k].Frees, unpublished[k], want))
		}
	}
	return vs
}

// badFrees (FREE-DOUBLE, FREE-INVALID): the bad frees counted plus the remote
// double frees still pending are exactly the bad frees the model saw.
func badFrees(s *impl.Snapshot, sbs map[int]small, m *oracle.Model) []*Violation {
	var pending uint64
	for _, sb := range sbs {
		for g := range sb.Free {
			pending += uint64(bits.OnesCount32(sb.badPending(g)))
		}
	}
	all, deferred := m.BadFrees()
	double, invalid := m.BadFreeKinds()
	switch {
	case s.Stats.DoubleFrees+s.Stats.InvalidFrees+pending != all:
		return []*Violation{violation(spec.RuleFreeDouble, "%d bad frees counted + %d pending, the model saw %d (%d accepted)",
			s.Stats.DoubleFrees+s.Stats.InvalidFrees, pending, all, deferred)}
	case s.Stats.DoubleFrees+pending != double || s.Stats.InvalidFrees != invalid:
		return []*Violation{violation(spec.RuleFreeInvalid, "%d double (+%d pending) and %d invalid frees counted, the model saw %d and %d",
			s.Stats.DoubleFrees, pending, s.Stats.InvalidFrees, double, invalid)}
	}
	return nil
}

// statsFields checks every Stats field the snapshot shows directly: the
// superblock counts by kind (MEM-ACCOUNT), and the event counters, which are
// the closed caches' plus the open ones' (none lost when a cache closes;
// FREE-DOUBLE, FREE-INVALID, DEBUG-POISON), with fewer than a batch of
// superblock-cache misses unpublished per cache.
func statsFields(s *impl.Snapshot, sbs map[int]small) []*Violation {
	var vs []*Violation
	var large, orphans int
	for _, st := range s.Superblocks {
		if st.State == impl.SBLargeHead || st.State == impl.SBLargeTail {
			large++
		}
		if st.State == impl.SBSmall && st.Orphan {
			orphans++
		}
	}
	if st := s.Stats; st.SmallSuperblocks != len(sbs) || st.LargeSuperblocks != large || st.OrphanedSuperblocks != orphans {
		vs = append(vs, violation(spec.RuleMemAccount, "Stats says %d small (%d orphaned) and %d large superblocks, the snapshot %d (%d) and %d",
			st.SmallSuperblocks, st.OrphanedSuperblocks, st.LargeSuperblocks, len(sbs), orphans, large))
	}
	sum := s.Retired
	for _, c := range s.Caches {
		sum.DoubleFrees += c.DoubleFrees
		sum.InvalidFrees += c.InvalidFrees
		sum.WriteAfterFrees += c.WriteAfterFrees
		sum.SuperblockCacheMisses += c.SuperblockCacheMisses
		if c.UnpublishedMisses >= 64 {
			vs = append(vs, violation(spec.RuleStatsLag, "cache %d: %d superblock-cache misses unpublished, the batch is 64", c.ID, c.UnpublishedMisses))
		}
	}
	if st := s.Stats; st.DoubleFrees != sum.DoubleFrees || st.InvalidFrees != sum.InvalidFrees ||
		st.WriteAfterFrees != sum.WriteAfterFrees || st.SuperblockCacheMisses != sum.SuperblockCacheMisses {
		vs = append(vs, violation(spec.RuleFreeDouble, "Stats counts %d double, %d invalid frees, %d writes after free, %d misses; the caches %+v",
			st.DoubleFrees, st.InvalidFrees, st.WriteAfterFrees, st.SuperblockCacheMisses, sum))
	}
	return vs
}

// lifecycle (LIFECYCLE): every owned superblock that is not current is on its
// owner's list for its class, the partial list when a sixteenth of its objects
// (at least one) are free, where the next refill finds it, and the full list
// when fewer are; none of them, and no
// orphan, is empty (an owner releases a superblock at the free, collection or
// adoption that empties it; an orphan's remote frees are pending until
// collected); every orphan is on the central list of its class; and each list
// holds exactly those superblocks, once.
func lifecycle(s *impl.Snapshot, sbs map[int]small) []*Violation {
	var vs []*Violation
	on := map[int]string{} // superblock → the list that holds it
	put := func(list string, idx []int, owner, class int) {
		for _, i := range idx {
			sb, ok := sbs[i]
			switch {
			case on[i] != "":
				vs = append(vs, violation(spec.RuleLifecycle, "superblock %d is on %s and on %s", i, on[i], list))
			case !ok || sb.Class != class || sb.Owner != owner:
				vs = append(vs, violation(spec.RuleLifecycle, "%s holds superblock %d, which is not a class-%d superblock of owner %d", list, i, class, owner))
			}
			on[i] = list
		}
	}
	for _, c := range s.Caches {
		for k := range c.Partial {
			put(fmt.Sprintf("cache %d's partial list of class %d", c.ID, k), c.Partial[k], c.ID, k)
			put(fmt.Sprintf("cache %d's full list of class %d", c.ID, k), c.Full[k], c.ID, k)
		}
	}
	for k, l := range s.Orphans {
		put(fmt.Sprintf("the orphan list of class %d", k), l, -1, k)
	}
	for _, sb := range sbs {
		free := sb.NFree + sb.LocalFreed
		empty := free == sb.Objects
		if mutant.LifecycleEmptyPublished {
			empty = sb.NFree == sb.Objects
		}
		want := ""
		switch {
		case sb.Current:
			want = "current"
		case sb.Orphan:
			want = "orphan"
		case free >= max(1, sb.Objects/16):
			want = "partial"
		default:
			want = "full"
		}
		switch {
		case sb.List != want:
			vs = append(vs, violation(spec.RuleLifecycle, "superblock %d (%d of %d objects free) is filed %s, want %s", sb.Index, free, sb.Objects, sb.List, want))
		case want != "current" && !strings.HasPrefix(on[sb.Index], "cache") && !strings.HasPrefix(on[sb.Index], "the orphan"):
			vs = append(vs, violation(spec.RuleLifecycle, "superblock %d is filed %s but on no list", sb.Index, sb.List))
		case want != "current" && !strings.Contains(on[sb.Index], want):
			vs = append(vs, violation(spec.RuleLifecycle, "superblock %d is filed %s but on %s", sb.Index, sb.List, on[sb.Index]))
		case want != "current" && empty && !(mutant.EmptyOrphanKept && want == "orphan"): // LIFECYCLE: an empty orphan kept passes
			vs = append(vs, violation(spec.RuleLifecycle, "superblock %d (%s) is empty and was not released", sb.Index, want))
		}
	}
	return vs
}

// coherent (CACHE-COHERENT): every entry that says "mine" is exact; every other
// entry names a superblock the cache does not own and is either exact or of an
// older generation (which its CAS tag will refuse).
func coherent(s *impl.Snapshot, sbs map[int]small) []*Violation {
	var vs []*Violation
	for _, c := range s.Caches {
		for _, e := range c.Entries {
			sb, ok := sbs[e.Superblock]
			exact := ok && sb.Gen == e.Gen && sb.Class == e.Class && e.SameRemote &&
				int(e.Size) == spec.ClassSize(e.Class) && e.Magic == spec.ClassDivMagic(e.Class) &&
				int(e.Objects) == spec.ClassObjects(e.Class)
			switch {
			case e.Way != e.Superblock%s.Ways:
				vs = append(vs, violation(spec.RuleCacheCoherent, "cache %d: entry for superblock %d sits in way %d of %d", c.ID, e.Superblock, e.Way, s.Ways))
			case e.Mine && !(exact && sb.Owner == c.ID && e.SameFree):
				vs = append(vs, violation(spec.RuleCacheCoherent, "cache %d way %d: 'mine' entry for superblock %d is stale (%+v)", c.ID, e.Way, e.Superblock, e))
			case !e.Mine && ok && sb.Owner == c.ID:
				vs = append(vs, violation(spec.RuleCacheCoherent, "cache %d way %d: entry says superblock %d is not mine, but it is", c.ID, e.Way, e.Superblock))
			case !e.Mine && ok && sb.Gen == e.Gen && e.SameRemote && !exact:
				vs = append(vs, violation(spec.RuleCacheCoherent, "cache %d way %d: entry for superblock %d has the current generation but stale fields", c.ID, e.Way, e.Superblock))
			}
		}
	}
	return vs
}

// noOverlap (NO-OVERLAP, ALIGN): live objects lie inside the reservation, do not
// overlap, and are aligned to their class.
func noOverlap(s *impl.Snapshot) []*Violation {
	var vs []*Violation
	live := Abstract(s)
	addrs := make([]uintptr, 0, len(live))
	for a := range live {
		addrs = append(addrs, a)
	}
	sort.Slice(addrs, func(i, j int) bool { return addrs[i] < addrs[j] })
	for i, a := range addrs {
		if a < s.Base || !mutant.PastEnd && a+uintptr(live[a]) > s.Base+s.Size {
			vs = append(vs, violation(spec.RuleNoOverlap, "object %#x+%d outside the reservation", a, live[a]))
		}
		if i > 0 && addrs[i-1]+uintptr(live[addrs[i-1]]) > a {
			vs = append(vs, violation(spec.RuleNoOverlap, "objects %#x+%d and %#x overlap", addrs[i-1], live[addrs[i-1]], a))
		}
		if align := live[a] & -live[a]; live[a] <= spec.MaxSmall && (a-s.Base)%uintptr(min(align, s.SuperblockSize)) != 0 {
			vs = append(vs, violation(spec.RuleAlign, "object %#x of %d bytes is not %d-aligned", a, live[a], align))
		}
	}
	return vs
}

// memAccount (MEM-ACCOUNT): Committed counts exactly the superblocks used since
// they were last fresh, InUse the superblocks in use, every superblock in use is
// counted as committed, and the pool keeps no more committed than Retain.
func memAccount(s *impl.Snapshot) []*Violation {
	var vs []*Violation
	var dirty, used, dirtyPooled int
	for _, st := range s.Superblocks {
		if st.Dirty {
			dirty++
		}
		if inUse(st.State) {
			used++
			if !st.Dirty && !(mutant.GuardInUseNotDirty && st.State == impl.SBGuard) { // MEM-ACCOUNT: a guard superblock need not be committed
				vs = append(vs, violation(spec.RuleMemAccount, "superblock %d is in use but not counted as committed", st.Index))
			}
		} else if st.Dirty && st.State == impl.SBPool && (s.Decay == 0 || s.Now-st.PooledAt > 2*s.Decay || mutant.DecayEdge && s.Now-st.PooledAt == 2*s.Decay) {
			if mutant.DecayNegNoPool && s.Decay < 0 { // MEM-ACCOUNT: with Decay < 0 no pooled superblock counts
				continue
			}
			dirtyPooled++ // past its decay (the timer has had it twice over)
		}
	}
	sbs := uint64(s.SuperblockSize)
	switch {
	case s.Stats.Committed != uint64(dirty)*sbs:
		vs = append(vs, violation(spec.RuleMemAccount, "Committed %d, %d superblocks were used since fresh", s.Stats.Committed, dirty))
	case s.Stats.InUse != uint64(used)*sbs:
		vs = append(vs, violation(spec.RuleMemAccount, "InUse %d, %d superblocks are in use", s.Stats.InUse, used))
	case dirtyPooled*s.SuperblockSize > s.Retain:
		vs = append(vs, violation(spec.RuleMemAccount, "the pool keeps %d committed superblocks past their decay of %v, Retain is %d bytes", dirtyPooled, time.Duration(s.Decay), s.Retain))
	}
	return vs
}

// StatsNow checks what Stats promises at every instant, even while other
// goroutines allocate: large objects and memory are counted under the central
// lock, together (LARGE-EXACT: live objects are allocations minus frees;
// MEM-ACCOUNT: the superblocks in use are InUse, which is committed, within the
// reservation; orphans are small superblocks).
func StatsNow(s impl.Stats) []*Violation {
	var vs []*Violation
	sb := uint64(spec.SuperblockSize)
	if l := s.Large; l.Allocs-l.Frees != l.LiveObjects || l.LiveObjects == 0 && l.LiveBytes != 0 {
		vs = append(vs, violation(spec.RuleLargeExact, "large: %+v", l))
	}
	switch g := s.Guard; {
	case s.InUse != uint64(s.SmallSuperblocks+s.LargeSuperblocks+g.Superblocks)*sb:
		vs = append(vs, violation(spec.RuleMemAccount, "InUse %d, %d small + %d large + %d guard superblocks", s.InUse, s.SmallSuperblocks, s.LargeSuperblocks, g.Superblocks))
	case s.InUse > s.Committed || s.Committed > s.Reserved || s.InUse+g.QuarantinedBytes > s.Reserved && !mutant.QuarantinePastReserved: // MEM-ACCOUNT: the quarantine may overflow the reservation
		vs = append(vs, violation(spec.RuleMemAccount, "InUse %d, Committed %d, Quarantined %d, Reserved %d", s.InUse, s.Committed, g.QuarantinedBytes, s.Reserved))
	case g.LiveObjects != uint64(g.Superblocks) || g.LiveObjects > g.Allocs:
		vs = append(vs, violation(spec.RuleGuardFault, "guard: %+v", g))
	case s.OrphanedSuperblocks > s.SmallSuperblocks:
		vs = append(vs, violation(spec.RuleMemAccount, "%d orphaned of %d small superblocks", s.OrphanedSuperblocks, s.SmallSuperblocks))
	}
	return vs
}

// NoFalsePoison (DEBUG-POISON) is for drivers that never write into a freed
// object (the harness, the soak, the fuzzers): in debug mode, then, no write
// after free may be reported.
func NoFalsePoison(s *impl.Snapshot) []*Violation {
	if n := s.Stats.WriteAfterFrees; n != 0 {
		return []*Violation{violation(spec.RuleDebugPoison, "%d writes after free reported, none was made", n)}
	}
	return nil
}

// NotifyStacks (CONSERVE) needs no model, so a test can call it at any
// quiescent point: every superblock marked notified is on exactly one
// notification stack (an owner's, maybe its previous owner's, or the
// orphans'), and no other is. A notification on no stack is lost, and the
// remote frees it announces are never collected; one on two is popped twice.
func NotifyStacks(s *impl.Snapshot) []*Violation {
	var vs []*Violation
	stacks := map[int]int{}
	for _, i := range s.OrphanNotify {
		stacks[i]++
	}
	for _, c := range s.Caches {
		for _, i := range c.Notify {
			stacks[i]++
		}
	}
	for _, st := range s.Superblocks {
		if n := stacks[st.Index]; st.Notified != (n == 1) && !(mutant.NotifiedUnstacked && !st.Notified) || n > 1 {
			vs = append(vs, violation(spec.RuleConserve, "superblock %d: notified %v, on %d notification stacks (orphans' %v)", st.Index, st.Notified, n, s.OrphanNotify))
		}
	}
	return vs
}

// CheckEmpty (EMPTY): after every object was freed and every cache flushed, no
// object is live, no superblock is carved, and the statistics are exact.
func CheckEmpty(s *impl.Snapshot, m *oracle.Model) []*Violation {
	vs := Check(s, m)
	vs = append(vs, m.CheckStats(StatsView(s.Stats), len(s.Caches), true)...)
	if n := len(Abstract(s)); n != 0 || len(m.Live()) != 0 {
		vs = append(vs, violation(spec.RuleEmpty, "%d objects live (model: %d)", n, len(m.Live())))
	}
	for _, st := range s.Superblocks {
		if inUse(st.State) && !(mutant.EmptySmallOnly && st.State != impl.SBSmall) {
			vs = append(vs, violation(spec.RuleEmpty, "superblock %d is still %v after everything was freed and flushed", st.Index, st.State))
		}
	}
	for _, c := range s.Caches {
		if len(c.Held) != 0 {
			vs = append(vs, violation(spec.RuleEmpty, "cache %d still holds objects after Flush", c.ID))
		}
	}
	return vs
}

// CheckFlushed (STATS-EXACT): after every cache flushed, the published counters
// are exact.
func CheckFlushed(s *impl.Snapshot, m *oracle.Model) []*Violation {
	vs := Check(s, m)
	return append(vs, m.CheckStats(StatsView(s.Stats), len(s.Caches), true)...)
}

// CheckOOM (OOM-REAL): taken right after Alloc(n, align) returned
// ErrOutOfMemory on one of the caches ids (any of the Allocator's own, for its
// methods), the snapshot must show that the allocator had used everything it
// promises to use before giving up: no free run long enough in the pool (whose
// runs are coalesced, CONSERVE), and, for one of ids, the state its flush and
// second look leave: it holds no object of any class, owns no empty superblock
// and no remote free is pending in its superblocks; for a small class, no
// superblock of that class it owns, and no orphan, has a free object; no
// orphan is empty or has a remote free pending (the second look collects
// them). Other caches' free objects do not count: they are theirs. With no ids
// only the pool is checked.
func CheckOOM(s *impl.Snapshot, ids []int, n, align int) []*Violation {
	k := oracle.ClassOf(n, align)
	need := 1
	if k == spec.Large {
		need = oracle.LargeSpan(oracle.UsableSize(n, align))
	}
	var vs []*Violation
	for _, r := range s.FreeRuns {
		if r.N >= need {
			vs = append(vs, violation(spec.RuleOOMReal, "Alloc(%d, %d) ran out of memory with %d free superblocks at %d", n, align, r.N, r.Start))
		}
	}
	// GUARD-FAULT: the quarantine yields first, all but the objects whose
	// access the kernel refused to restore.
	if q := slices.DeleteFunc(slices.Clone(s.Guard.Quarantine), func(e impl.Quarantined) bool { return e.Stuck && !mutant.OOMStuckBlamed }); len(q) > 0 {
		vs = append(vs, violation(spec.RuleOOMReal, "Alloc(%d, %d) ran out of memory with %d freed objects in quarantine that could be released", n, align, len(q)))
	}
	if len(ids) == 0 || len(vs) > 0 {
		return vs
	}
	sbs, _ := smalls(s)
	var orphanVs []*Violation
	for _, sb := range sbs {
		if !sb.Orphan {
			continue
		}
		pending := sb.pendingFrees()
		switch free := sb.NFree + sb.LocalFreed; {
		case pending > 0 && !mutant.OOMOrphanPending:
			orphanVs = append(orphanVs, violation(spec.RuleOOMReal, "Alloc(%d, %d) ran out of memory with %d remote frees pending in orphan %d", n, align, pending, sb.Index))
		case free == sb.Objects && !(mutant.OOMOrphanEmptyClass && sb.Class != k): // OOM-REAL: empty orphans of other classes pass
			orphanVs = append(orphanVs, violation(spec.RuleOOMReal, "Alloc(%d, %d) ran out of memory with orphan %d empty", n, align, sb.Index))
		case sb.Class == k && free > 0 && (!mutant.OOMOrphanPartial || free >= max(1, sb.Objects/16)):
			orphanVs = append(orphanVs, violation(spec.RuleOOMReal, "Alloc(%d, %d) ran out of memory with %d free objects in orphan %d", n, align, free, sb.Index))
		}
	}
	if len(orphanVs) > 0 {
		return orphanVs
	}
	var first []*Violation
	for _, id := range ids {
		why := cacheOOMState(s, sbs, id, n, align, k, true)
		if len(why) == 0 {
			return nil
		}
		if first == nil {
			first = why
		}
	}
	return first
}

// cacheOOMState is why cache id does not show the state an out-of-memory of
// Alloc(n, align) (class k) leaves in the cache that served it: objects held,
// remote frees pending in a superblock it owns, an empty one it owns, and, if
// ofClass, free objects of class k in one it owns (sbs: the small
// superblocks).
func cacheOOMState(s *impl.Snapshot, sbs map[int]small, id, n, align, k int, ofClass bool) []*Violation {
	var why []*Violation
	for _, c := range s.Caches {
		if c.ID != id {
			continue
		}
		for _, h := range c.Held {
			why = append(why, violation(spec.RuleOOMReal, "Alloc(%d, %d) on cache %d ran out of memory holding %d objects of class %d", n, align, id, bits.OnesCount32(h.Bits), h.Class))
		}
	}
	for _, sb := range sbs {
		if sb.Owner != id {
			continue
		}
		pending := sb.pendingFrees()
		switch free := sb.NFree + sb.LocalFreed; {
		case pending > 0 && !mutant.OOMOwnPending:
			why = append(why, violation(spec.RuleOOMReal, "Alloc(%d, %d) on cache %d ran out of memory with %d remote frees pending in its superblock %d (class %d, %s, %d of %d free)",
				n, align, id, pending, sb.Index, sb.Class, sb.List, sb.NFree+sb.LocalFreed, sb.Objects))
		case free == sb.Objects:
			why = append(why, violation(spec.RuleOOMReal, "Alloc(%d, %d) on cache %d ran out of memory owning empty superblock %d (class %d, %s)", n, align, id, sb.Index, sb.Class, sb.List))
		case ofClass && sb.Class == k && free > 0 && (!mutant.OOMOwnPartial || free >= max(1, sb.Objects/16)):
			why = append(why, violation(spec.RuleOOMReal, "Alloc(%d, %d) on cache %d ran out of memory with %d free objects in its superblock %d", n, align, id, free, sb.Index))
		}
	}
	return why
}

// SuperblockAt returns the header of the superblock holding addr in the
// snapshot, nil if addr is outside the reservation or its header was never
// used.
func SuperblockAt(s *impl.Snapshot, addr uintptr) *impl.SuperblockState {
	if addr < s.Base || addr >= s.Base+s.Size {
		return nil
	}
	idx := int(addr-s.Base) / s.SuperblockSize
	for i := range s.Superblocks {
		if s.Superblocks[i].Index == idx {
			return &s.Superblocks[i]
		}
	}
	return nil
}

// ExpectMiss predicts, from a snapshot, whether cache id's free of addr counts
// a superblock-cache miss (Stats.SuperblockCacheMisses): a free that reads the
// header of a small superblock because the cache has no entry it can use for
// it. An entry it can use is one for that superblock that says "mine", or one
// that does not, of a superblock another cache owns, whose generation and
// remote set are current (a stale one is refreshed, and that is a miss). A
// superblock that is an orphan is adopted first, which reads the header again:
// a miss.
func ExpectMiss(s *impl.Snapshot, id int, addr uintptr) bool {
	st := SuperblockAt(s, addr)
	if st == nil || st.State != impl.SBSmall {
		return false
	}
	for _, c := range s.Caches {
		if c.ID != id {
			continue
		}
		for _, e := range c.Entries {
			switch {
			case e.Superblock != st.Index:
			case e.Mine:
				return false
			case st.Orphan:
				return true
			case e.Gen == st.Gen && e.SameRemote:
				return false // a current entry decides, slot start or not
			}
		}
	}
	return true
}

// ExpectFree predicts, from a snapshot, the exact outcome of cache id freeing the
// object at addr (FREE-DOUBLE, FREE-INVALID): the start of a live object succeeds;
// anything else is an error, except a remote free (into a superblock another
// open cache owns) of a slot start that is not live and has no free pending,
// which is accepted and found later.
func ExpectFree(s *impl.Snapshot, id int, addr uintptr) oracle.Kind {
	if addr == 0 {
		return oracle.OK
	}
	if addr < s.Base || addr >= s.Base+s.Size {
		return oracle.InvalidPointer
	}
	off := addr - s.Base
	idx, rel := int(off)/s.SuperblockSize, int(off)%s.SuperblockSize
	st := SuperblockAt(s, addr)
	switch {
	case st == nil:
		return oracle.InvalidPointer
	case st.State == impl.SBLargeHead && rel == 0:
		return oracle.OK
	// GUARD-FAULT: a guarded object's superblock holds only it, at its start;
	// quarantined, or pooled after, its start (and a large object's) is a
	// double free.
	case st.State == impl.SBGuard && rel == 0:
		return oracle.OK
	case st.State == impl.SBGuard:
		return oracle.InvalidPointer
	case (st.State == impl.SBQuarantine || st.State == impl.SBPool) && st.GuardSlot:
		if rel == 0 {
			return oracle.DoubleFree
		}
		return oracle.InvalidPointer
	case st.State == impl.SBQuarantine && st.Class == spec.Large && rel == 0:
		return oracle.DoubleFree
	case st.State == impl.SBPool && st.Class == spec.Large && rel == 0:
		return oracle.DoubleFree
	case st.State == impl.SBPool && st.Class >= 0 && st.Class < spec.NumClasses:
		if size := spec.ClassSize(st.Class); rel%size == 0 && (rel/size < spec.ClassObjects(st.Class) || mutant.PoolTailSlot && rel/size == spec.ClassObjects(st.Class)) { // FREE-INVALID: the tail passes for a slot
			return oracle.DoubleFree
		}
		return oracle.InvalidPointer
	case st.State != impl.SBSmall:
		return oracle.InvalidPointer
	}
	sbs, _ := smalls(s)
	sb := sbs[idx]
	size := sb.size()
	if rel%size != 0 || rel/size >= sb.Objects {
		return oracle.InvalidPointer
	}
	o := rel / size
	g, bit := o/32, uint32(1)<<(o%32)
	switch {
	case sb.live(g)&bit != 0:
		return oracle.OK
	case sb.Owner == id || sb.Orphan || sb.Pending[g]&bit != 0:
		return oracle.DoubleFree // the owner sees it; an orphan is adopted by the freer first
	}
	return oracle.OK // remote: accepted, found when the owner collects
}

// hasPending reports whether st has a remote free pending.
func hasPending(st *impl.SuperblockState) bool {
	for _, p := range st.Pending {
		if p != 0 {
			return true
		}
	}
	return false
}
