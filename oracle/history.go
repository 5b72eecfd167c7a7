// History: what concurrent calls on one address may have done.
//
// A sequential Model judges one call at a time. When calls overlap, and above
// all when a free comes through a stale pointer while its address is being
// reused, the outcome of one call depends on where the others took effect. The
// rule is linearizability, address by address: the calls that touched an
// address are correct if they can be put in one order, each taking effect at
// some instant between its begin and its end, in which every call's outcome is
// the one the sequential rules give at that instant. Addresses are independent
// objects (what one free does to an address does not depend on another
// address's state), so judging each address alone judges the whole history.

package oracle

import (
	"fmt"
	"slices"
	"sort"
	"strings"

	"github.com/refalloc/refalloc/internal/mutant"
	"github.com/refalloc/refalloc/spec"
)

// CallKind is what a call did to the address.
type CallKind int

const (
	// CallAlloc returned the address: the object must not have been live
	// (NO-OVERLAP); it is live after.
	CallAlloc CallKind = iota
	// CallFree freed the address. Got OK: the object was live and is freed,
	// or it was not live and the free was accepted to be found later (a
	// remote double free, FREE-DOUBLE's deferred case). Got DoubleFree or
	// InvalidPointer: the object was not live (a valid free is never
	// refused), and nothing changes.
	CallFree
	// CallKeep is a Realloc that stayed in place: the object was live and is
	// live after, as the Realloc's object.
	CallKeep
	// CallNoop is a call on the address that must leave it as it was, live or
	// not (a Realloc that failed for want of memory).
	CallNoop
)

func (k CallKind) String() string {
	return [...]string{"alloc", "free", "realloc in place", "failed realloc"}[k]
}

// Call is one call that touched one address, as a concurrent driver saw it:
// Begin and End are its positions in the driver's one total order of call
// begins and ends (Begin < End), Got its outcome.
type Call struct {
	Kind       CallKind
	Begin, End uint64
	Got        Kind
	// Interior: the address lay inside another object that was live from
	// before the call began until after it ended, so the only right outcome
	// of a free is InvalidPointer (FREE-INVALID), or Closed from a closed
	// cache or Allocator.
	Interior bool
	// Who names the caller in reports.
	Who string
}

func (c Call) String() string {
	s := fmt.Sprintf("%s [%d,%d] %v", c.Kind, c.Begin, c.End, c.Got)
	if c.Interior {
		s += " (inside a live object)"
	}
	if c.Who != "" {
		s += " by " + c.Who
	}
	return s
}

// Outcome is one end state the calls can have left: Live is the index of the
// call whose object is live at the end (an alloc or an in-place realloc), or
// LiveBefore for the object that was live before the calls, or LiveNone.
type Outcome struct{ Live int }

const (
	LiveNone   = -1
	LiveBefore = -2
)

// Counts derives, for an outcome, how many objects died (each by exactly one
// valid free: a Realloc in place replaces the object without a free or an
// allocation) and how many frees that returned nil were double frees the
// allocator must still find (deferred).
func (o Outcome) Counts(liveBefore bool, calls []Call) (validFrees, deferred int) {
	objects, okFrees := 0, 0
	if liveBefore {
		objects++
	}
	for _, c := range calls {
		switch {
		case c.Kind == CallAlloc:
			objects++
		case c.Kind == CallFree && c.Got == OK:
			okFrees++
		}
	}
	if o.Live != LiveNone {
		objects--
	}
	return objects, okFrees - objects
}

// maxOverlap bounds the calls on one address in flight at once.
const maxOverlap = 64

// JudgeAddress returns every outcome that some order of calls allows, starting
// from an address whose object is live (liveBefore) or not. No outcome means
// no order explains what the calls returned: the violation says which rule.
func JudgeAddress(liveBefore bool, calls []Call) ([]Outcome, *Violation) {
	for _, c := range calls {
		// A closed cache or Allocator refuses every free as ErrClosed, before
		// it looks at the pointer: that is right inside a live object too.
		if c.Kind == CallFree && c.Interior && c.Got != InvalidPointer && c.Got != Closed {
			return nil, violation(spec.RuleFreeInvalid, "a free inside a live object returned %v: %v", c.Got, c)
		}
	}
	type event struct {
		at  uint64
		end bool
		i   int
	}
	events := make([]event, 0, 2*len(calls))
	for i, c := range calls {
		events = append(events, event{c.Begin, false, i}, event{c.End, true, i})
	}
	sort.Slice(events, func(a, b int) bool { return events[a].at < events[b].at })
	// A state is the object live now and which of the calls in flight (begun,
	// not ended: active, by position) have taken effect. At a call's end every
	// state must have let it take effect; then it leaves the active set.
	type state struct {
		live int
		done uint64
	}
	start := LiveNone
	if liveBefore {
		start = LiveBefore
	}
	states := map[state]bool{{start, 0}: true}
	var active []int
	for _, ev := range events {
		if !ev.end {
			if len(active) == maxOverlap && !mutant.OverlapLate || len(active) == maxOverlap+1 {
				return nil, violation(spec.RuleRefines, "more than %d calls on one address at once", maxOverlap)
			}
			active = append(active, ev.i)
			continue
		}
		pos := slices.Index(active, ev.i)
		// Close every state under "one more active call takes effect", then
		// keep those where the ending call has, without it.
		next := map[state]bool{}
		work := make([]state, 0, len(states))
		for s := range states {
			work = append(work, s)
		}
		seen := map[state]bool{}
		for len(work) > 0 {
			s := work[len(work)-1]
			work = work[:len(work)-1]
			if seen[s] {
				continue
			}
			seen[s] = true
			if s.done&(1<<pos) != 0 {
				low := s.done & (1<<pos - 1)
				next[state{s.live, low | s.done>>(pos+1)<<pos}] = true
			}
			for p, j := range active {
				if s.done&(1<<p) != 0 {
					continue
				}
				if live, ok := step(calls[j], j, s.live); ok {
					work = append(work, state{live, s.done | 1<<p})
				}
			}
		}
		if len(next) == 0 {
			return nil, violation(ruleOf(calls[ev.i]), "no order of the calls on this address explains %v; the calls: %s",
				calls[ev.i], describe(calls))
		}
		states = next
		active = slices.Delete(active, pos, pos+1)
	}
	var out []Outcome
	have := map[int]bool{}
	for s := range states {
		if !have[s.live] {
			have[s.live] = true
			out = append(out, Outcome{Live: s.live})
		}
	}
	sort.Slice(out, func(a, b int) bool { return out[a].Live < out[b].Live })
	return out, nil
}

// step applies call c (index i) to an address whose live object is live, if
// the sequential rules allow c's outcome there.
func step(c Call, i, live int) (int, bool) {
	isLive := live != LiveNone
	switch c.Kind {
	case CallAlloc:
		return i, !isLive // NO-OVERLAP
	case CallKeep:
		return i, isLive
	case CallNoop:
		return live, true
	}
	switch c.Got {
	case OK:
		return LiveNone, true // freed, or a deferred double free
	case DoubleFree, InvalidPointer:
		return live, !isLive // FREE-DOUBLE: a valid free is never refused
	}
	return live, c.Got == Closed
}

func ruleOf(c Call) string {
	if c.Kind == CallAlloc {
		return spec.RuleNoOverlap
	}
	return spec.RuleFreeDouble
}

func describe(calls []Call) string {
	var b strings.Builder
	for i, c := range calls {
		fmt.Fprintf(&b, "\n  %d: %v", i, c)
	}
	return b.String()
}

// Forget takes the live object at addr out of the model without counting a
// free: a concurrent driver judges the address later, by JudgeAddress, and
// settles it (Settle).
func (m *Model) Forget(addr uintptr) (Object, bool) {
	o, ok := m.live[addr]
	if !mutant.ForgetKeeps {
		delete(m.live, addr)
	}
	return o, ok
}

// Restore makes o live again without counting an allocation: a concurrent
// driver that took o out for a call (Forget, or Free and Unfree) puts it, or
// what a Realloc in place made of it, back.
func (m *Model) Restore(o Object) { m.live[o.Addr] = o }

// Unfree takes back the true free Free counted for o, whose free is to be
// judged with the other calls on its address instead.
func (m *Model) Unfree(o Object) { m.counts[o.Class].Frees-- }

// Settle applies to the model the outcome JudgeAddress chose for the calls on
// addr: before is the object live before them (nil if none), objs[i] the
// object call i left live (for allocs and in-place reallocs). Every object but
// the one live at the end died by one valid free; each alloc is a true
// allocation; a free that returned nil beyond the valid ones is a double free
// the allocator must find later; a refused free is a bad free found at once.
func (m *Model) Settle(addr uintptr, before *Object, calls []Call, objs []Object, o Outcome) {
	for i, c := range calls {
		switch {
		case c.Kind == CallAlloc:
			m.counts[objs[i].Class].Allocs++
			m.counts[objs[i].Class].Frees++ // undone below for the one left live
		case c.Kind == CallFree && (c.Got == DoubleFree || c.Got == InvalidPointer):
			m.badFrees++
			if c.Got == InvalidPointer {
				m.invalid++
			}
		}
	}
	if before != nil {
		m.counts[before.Class].Frees++
	}
	_, deferred := o.Counts(before != nil, calls)
	m.badFrees += uint64(deferred)
	m.deferred += uint64(deferred)
	switch o.Live {
	case LiveNone:
		delete(m.live, addr)
		return
	case LiveBefore:
		m.live[addr] = *before
		m.counts[before.Class].Frees--
	default:
		m.live[addr] = objs[o.Live]
		m.counts[objs[o.Live].Class].Frees--
	}
}
