// Guard mode's structural rules (GUARD-FAULT).

package invariants

import (
	"github.com/refalloc/refalloc/impl"
	"github.com/refalloc/refalloc/internal/mutant"
	"github.com/refalloc/refalloc/oracle"
	"github.com/refalloc/refalloc/spec"
)

// guarded (GUARD-FAULT): the quarantine is within its bounds and is exactly
// the quarantined superblocks, each object's run whole and of its kind; no
// live object (the model's) lies in a quarantined superblock, so none was
// handed out while quarantined; where guard mode protects memory, quarantined
// superblocks were given back to the OS (not committed); guard mode's
// statistics are the snapshot's; with every allocation sampled (rate 1) no
// cache holds a group at a quiescent point; and with guard mode off there is
// no trace of it.
func guarded(s *impl.Snapshot, m *oracle.Model) []*Violation {
	var vs []*Violation
	g := s.Guard
	byIndex := map[int]*impl.SuperblockState{}
	var guards, quarantined int
	var guardBytes uint64
	for i := range s.Superblocks {
		st := &s.Superblocks[i]
		byIndex[st.Index] = st
		switch st.State {
		case impl.SBGuard:
			guards++
			guardBytes += uint64(spec.ClassSize(st.Class))
			if !st.GuardSlot || st.Class < 0 || st.Class >= spec.NumClasses {
				vs = append(vs, violation(spec.RuleGuardFault, "guard superblock %d: class %d, slot %v", st.Index, st.Class, st.GuardSlot))
			}
		case impl.SBQuarantine:
			quarantined++
			if (g.Protects || mutant.QuarantineDirty) && st.Dirty {
				vs = append(vs, violation(spec.RuleGuardFault, "quarantined superblock %d is still committed", st.Index))
			}
		}
	}
	if !g.Enabled {
		if guards+quarantined > 0 || len(g.Quarantine) > 0 || s.Stats.Guard != (impl.GuardStats{}) && !mutant.GuardOffStatsUnchecked { // GUARD-FAULT: guard statistics with guard mode off pass
			vs = append(vs, violation(spec.RuleGuardFault, "guard mode is off, but %d guard and %d quarantined superblocks, %d quarantined objects, stats %+v",
				guards, quarantined, len(g.Quarantine), s.Stats.Guard))
		}
		return vs
	}
	// The quarantine: bounded, and exactly the quarantined superblocks.
	sbs := 0
	seen := map[int]bool{}
	for _, q := range g.Quarantine {
		first := int((q.Addr - s.Base) / uintptr(s.SuperblockSize))
		sbs += q.Superblocks
		want := q.Superblocks
		if q.Class != spec.Large {
			want = 1
			if q.Usable != spec.ClassSize(q.Class) && !(mutant.QuarantineUsableUnder && q.Usable < spec.ClassSize(q.Class)) { // GUARD-FAULT: a smaller usable size passes
				vs = append(vs, violation(spec.RuleGuardFault, "quarantined object %#x of class %d has %d usable bytes", q.Addr, q.Class, q.Usable))
			}
		} else if oracle.LargeSpan(q.Usable) != q.Superblocks {
			want = oracle.LargeSpan(q.Usable)
		}
		if q.Superblocks != want || q.Superblocks <= 0 {
			vs = append(vs, violation(spec.RuleGuardFault, "quarantined object %#x (class %d, %d bytes) spans %d superblocks", q.Addr, q.Class, q.Usable, q.Superblocks))
		}
		for i := first; i < first+q.Superblocks; i++ {
			st := byIndex[i]
			switch {
			case seen[i]:
				vs = append(vs, violation(spec.RuleGuardFault, "superblock %d is in two quarantined objects", i))
			case st == nil || st.State != impl.SBQuarantine:
				vs = append(vs, violation(spec.RuleGuardFault, "quarantined object %#x: superblock %d is %v", q.Addr, i, stateOf(st)))
			case i == first && (st.Class != q.Class || st.GuardSlot != (q.Class != spec.Large) && !mutant.QuarantineSlotUnchecked): // GUARD-FAULT: the head's slot mark unchecked
				vs = append(vs, violation(spec.RuleGuardFault, "quarantined object %#x of class %d: its head says class %d, slot %v", q.Addr, q.Class, st.Class, st.GuardSlot))
			case i != first && st.Class != -1:
				vs = append(vs, violation(spec.RuleGuardFault, "quarantined object %#x: its superblock %d says class %d", q.Addr, i, st.Class))
			}
			seen[i] = true
		}
	}
	counted := sbs
	if mutant.QuarantineBytesObjects {
		counted = len(g.Quarantine)
	}
	switch {
	case len(g.Quarantine) > g.QuarantineObjects:
		vs = append(vs, violation(spec.RuleGuardFault, "%d objects in quarantine, the bound is %d", len(g.Quarantine), g.QuarantineObjects))
	case counted*s.SuperblockSize > g.QuarantineBytes:
		vs = append(vs, violation(spec.RuleGuardFault, "%d bytes in quarantine, the bound is %d", sbs*s.SuperblockSize, g.QuarantineBytes))
	case len(seen) != quarantined && !(mutant.QuarantineUnlisted && len(seen) < quarantined): // GUARD-FAULT: unlisted quarantined superblocks pass
		vs = append(vs, violation(spec.RuleGuardFault, "%d superblocks are quarantined, the quarantine holds %d", quarantined, len(seen)))
	}
	// Nothing in quarantine is live: none of it was handed out.
	for _, o := range m.Live() {
		first := int((o.Addr - s.Base) / uintptr(s.SuperblockSize))
		last := int((o.Addr + uintptr(o.Usable) - 1 - s.Base) / uintptr(s.SuperblockSize))
		if mutant.GuardFirstSBOnly { // GUARD-FAULT: a large object's superblocks past its first unseen
			last = first
		}
		for i := first; i <= last; i++ {
			if seen[i] {
				vs = append(vs, violation(spec.RuleGuardFault, "live object %#x (%d bytes) lies in quarantined superblock %d", o.Addr, o.Usable, i))
				break
			}
		}
	}
	// Every small allocation sampled: each either got its own superblock or
	// was served from a group of one, at once.
	if g.SampleRate == 1 {
		for i, c := range s.Caches {
			if mutant.SampledHeldFirstCache && i > 0 { // GUARD-FAULT: only the first cache checked
				break
			}
			if len(c.Held) > 0 {
				vs = append(vs, violation(spec.RuleGuardFault, "every allocation is sampled, but cache %d holds %d groups", c.ID, len(c.Held)))
			}
		}
	}
	st := s.Stats.Guard
	quarantinedOff := st.Quarantined != len(g.Quarantine)
	if mutant.GuardStatsQuarantined { // GUARD-FAULT: Stats.Guard.Quarantined unchecked
		quarantinedOff = false
	}
	if st.LiveObjects != uint64(guards) || st.Superblocks != guards || st.LiveBytes != guardBytes ||
		quarantinedOff || st.QuarantinedBytes != uint64(sbs*s.SuperblockSize) || st.Allocs < st.LiveObjects {
		vs = append(vs, violation(spec.RuleGuardFault, "Stats.Guard %+v; the snapshot has %d guarded objects (%d bytes) and %d quarantined (%d superblocks)",
			st, guards, guardBytes, len(g.Quarantine), sbs))
	}
	return vs
}

func stateOf(st *impl.SuperblockState) string {
	if st == nil {
		return "unused"
	}
	return st.State.String()
}
