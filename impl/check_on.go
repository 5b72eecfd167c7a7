//go:build refalloc_check

// Internal assertions, compiled in by the refalloc_check build tag: checks that
// must run at the moment of an event, inside impl. Each names its rule.

package impl

import (
	"fmt"

	"github.com/refalloc/refalloc/internal/mutant"
	"github.com/refalloc/refalloc/spec"
)

const checks = true

// checkHit compares a superblock-cache hit with the authoritative header
// (CACHE-COHERENT): the fast path only acts on "mine" entries, which must be exact.
func (c *Cache) checkHit(e *sbEntry) {
	if msg := c.hitMismatch(e); msg != "" {
		panic(msg)
	}
}

// hitMismatch is checkHit's verdict: "" when the hit is exact.
func (c *Cache) hitMismatch(e *sbEntry) string {
	sb := e.sb
	gen, state, k := unpackMeta(sb.meta.Load())
	rs := sb.remote.Load()
	switch {
	case uintptr(sb.idx) != e.tag():
		return fmt.Sprintf("refalloc: %s: entry tag %d names header %d", spec.RuleCacheCoherent, e.tag(), sb.idx)
	case state != stateSmall || k != e.class || gen != e.gen:
		return fmt.Sprintf("refalloc: %s: hit on superblock %d with class %d gen %d, header says state %d class %d gen %d",
			spec.RuleCacheCoherent, sb.idx, e.class, e.gen, state, k, gen)
	case sb.owner.Load() != c && !mutant.CheckHitNoOwner:
		return fmt.Sprintf("refalloc: %s: entry says superblock %d is mine, header says otherwise", spec.RuleCacheCoherent, sb.idx)
	case e.rw == nil || e.rw != &rs.w[0] || e.nrw != uint32(len(rs.w)):
		return fmt.Sprintf("refalloc: %s: entry of superblock %d has a stale remote set", spec.RuleCacheCoherent, sb.idx)
	case e.free != &sb.free[0]:
		return fmt.Sprintf("refalloc: %s: entry of superblock %d has a stale free bitmap", spec.RuleCacheCoherent, sb.idx)
	case e.size != uint32(spec.ClassSize(int(k))) || e.magic != spec.ClassDivMagic(int(k)) || e.nobj != uint32(spec.ClassObjects(int(k))):
		return fmt.Sprintf("refalloc: %s: entry of superblock %d has stale class fields", spec.RuleCacheCoherent, sb.idx)
	}
	return ""
}

// checkLead checks, at refill, that what the cache holds of class k is within the
// bound STATS-LEAD states.
func (c *Cache) checkLead(k int) {
	if msg := c.leadMismatch(k); msg != "" {
		panic(msg)
	}
}

// leadMismatch is checkLead's verdict: "" when within the bound.
func (c *Cache) leadMismatch(k int) string {
	bound := min(32, spec.ClassObjects(k))
	if mutant.CheckLeadNoMin {
		bound = 32
	}
	if held := popcount(c.cls[k].bits); held > int32(bound) {
		return fmt.Sprintf("refalloc: %s: cache holds %d objects of class %d", spec.RuleStatsLead, held, k)
	}
	return ""
}
