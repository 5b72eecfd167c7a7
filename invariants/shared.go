// Shared: the Model driven from many goroutines, stale frees racing reuse included.

package invariants

import (
	"bytes"
	"fmt"
	"sort"
	"sync"

	"github.com/refalloc/refalloc/impl"
	"github.com/refalloc/refalloc/internal/mutant"
	"github.com/refalloc/refalloc/oracle"
	"github.com/refalloc/refalloc/spec"
)

// Shared drives one Allocator and the Model from many goroutines. A call on an
// object the caller holds is checked against the Model at once, under a mutex,
// in the safe order: an object leaves the Model before Free is called and
// enters it after Alloc returns, so another goroutine that gets the same address
// back is never mistaken for an overlap.
//
// A free through a stale pointer (StaleFree: an address the caller freed
// before, or one inside an object, or a double free) races whatever reuses the
// address, and its outcome depends on where the calls on that address took
// effect. From its begin until the next quiescent point (Settle) its address is
// judged later: every call on it is logged with its begin and end in one total
// order, the object that was live there leaves the Model, and Settle judges the
// calls together (oracle.JudgeAddress, per-address linearizability), picks the
// outcome the snapshot shows, and puts the survivor, if any, back in the Model.
// An object handed out while its address is judged later is not filled (a stale
// free may have freed it under its holder) and must read zero if it survives.
// The judgment rule (SPEC.md, FREE-DOUBLE): a free that returned nil for an
// address that was not live at any instant of the call is a double free the
// allocator must find later; a free refused while its object was live all
// along, or an address handed out while live, is a violation; and whatever a
// free returns, no live object's bytes change.
//
// Violations are collected, not returned, so that workers keep going.
type Shared struct {
	A     *impl.Allocator
	other *impl.Allocator // for frees of another Allocator's objects
	// MaxViolations bounds what is kept [10].
	MaxViolations int

	mu         sync.Mutex // guards everything below, and M
	M          *oracle.Model
	violations []*Violation
	exact      int                    // Checks of a flushed snapshot (STATS-EXACT)
	seq        uint64                 // the total order of call begins and ends
	live       map[uintptr]SharedObj  // the Model's live objects as handed out
	freeing    map[uintptr]*freeing   // per address, the free in flight of the object live there last
	later      map[uintptr]*judgement // addresses judged at the next Settle
	disarm     func()                 // the watchdog
	// hook, if set (tests: SetHook), runs without mu around a Free's or
	// Realloc's call on the allocator and after an Alloc's, so a test can
	// hold the call in flight at a chosen point (where a goroutine may be
	// preempted).
	hook func(at hookPoint, x uintptr)
}

// hookPoint is where a call in flight is held (Shared's hook).
type hookPoint int

const (
	hookCall      hookPoint = iota // begun, before the allocator call
	hookReturn                     // the allocator call returned, not yet ended
	hookHandedOut                  // an Alloc's call returned an object, not yet ended
)

// SharedObj is an object as a driver holds it.
type SharedObj struct {
	B []byte
	// Fill is the byte every byte of the object must still hold (INTEGRITY);
	// 0 for an object handed out while its address was judged later, which
	// must read zero.
	Fill  byte
	Cache int    // model ID of the cache that allocated it (Front: the Allocator)
	Inc   uint64 // the end of the call that handed it out: which object at its address
	// Mixed: a Realloc's result that its caller could not fill (its address
	// was judged later): its bytes are not checked.
	Mixed bool
}

// freeing is a free of a live object in flight.
type freeing struct {
	obj   oracle.Object
	held  SharedObj
	begin uint64
	who   string
	j     *judgement // set if its address became judged later meanwhile
	call  int        // its call in j
}

// judgement gathers the calls on one address since a stale free began there.
type judgement struct {
	before     *oracle.Object // the object live when it began, if any
	beforeHeld SharedObj
	calls      []oracle.Call
	objs       []oracle.Object // per call: the object an alloc left live
	held       []SharedObj     // per call: the object as its caller holds it
	covering   []*SharedObj    // per stale free: the live object around it at its begin
}

// NewShared makes an Allocator with opt and its Model.
func NewShared(opt impl.Options) (*Shared, error) {
	a, err := impl.New(opt)
	if err != nil {
		return nil, err
	}
	other, err := impl.New(impl.Options{Reserve: 64 * spec.SuperblockSize})
	if err != nil {
		a.Close()
		return nil, err
	}
	snap := a.Snapshot()
	return &Shared{
		A: a, other: other, M: oracle.New(snap.Base, snap.Size), MaxViolations: 10,
		live: map[uintptr]SharedObj{}, freeing: map[uintptr]*freeing{}, later: map[uintptr]*judgement{},
		disarm: arm(),
	}, nil
}

// Close closes the Allocator (reporting leaks as EMPTY violations).
func (s *Shared) Close() {
	defer s.disarm()
	if err := s.A.Close(); err != nil {
		s.Record(violation(spec.RuleEmpty, "Close: %v", err))
	}
	s.other.Close()
}

// Record keeps violations.
func (s *Shared) Record(vs ...*Violation) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.record(vs...)
}

func (s *Shared) record(vs ...*Violation) {
	for _, v := range vs {
		if v != nil && len(s.violations) < s.MaxViolations {
			s.violations = append(s.violations, v)
		}
	}
}

// Violations returns what was recorded.
func (s *Shared) Violations() []*Violation {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]*Violation(nil), s.violations...)
}

// tick is the next position in the order of begins and ends. Under mu.
func (s *Shared) tick() uint64 {
	progress()
	s.seq++
	return s.seq
}

// OpenCache makes a cache and gives it a model ID.
func (s *Shared) OpenCache() (*impl.Cache, int, error) {
	c, err := s.A.NewCache()
	if err != nil {
		return nil, 0, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	id := c.ID() // the model's ID is the snapshot's
	s.record(s.M.OpenCache(id))
	return c, id, nil
}

// CloseCache closes cache id: its superblocks become orphans.
func (s *Shared) CloseCache(c *impl.Cache, id int) {
	err := c.Close()
	s.mu.Lock()
	defer s.mu.Unlock()
	s.record(s.M.CloseCache(id, Kind(err)))
}

// who names a cache in reports.
func who(id int) string {
	if id == Front {
		return "the Allocator"
	}
	return fmt.Sprintf("cache %d", id)
}

// Alloc allocates through c (nil: the Allocator), checks the answer with the
// Model and ZEROED, and fills the object with fill. ok is false on an error
// (which the Model allowed, or a violation was recorded).
func (s *Shared) Alloc(c *impl.Cache, id, n, align int, fill byte) (o SharedObj, ok bool) {
	if c == nil {
		id = Front
	}
	s.mu.Lock()
	begin := s.tick()
	s.mu.Unlock()
	var b []byte
	var err error
	if c == nil {
		b, err = s.A.AllocAligned(n, align)
	} else {
		b, err = c.AllocAligned(n, align)
	}
	if err == nil {
		s.at(hookHandedOut, addr(b))
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	end := s.tick()
	if err != nil {
		if v := s.M.Alloc(id, n, align, 0, 0, 0, Kind(err)); !mutant.SharedAllocErrUnjudged { // REFINES: any error passes
			s.record(v)
		}
		return SharedObj{}, false
	}
	return s.handedOut(id, n, align, b, fill, begin, end, oracle.CallAlloc)
}

// handedOut enters an object a call returned into the Model, or, if its address
// is judged later, into that judgement. Under mu.
func (s *Shared) handedOut(id, n, align int, b []byte, fill byte, begin, end uint64, kind oracle.CallKind) (SharedObj, bool) {
	x := addr(b)
	if j := s.later[x]; j != nil {
		obj, v := s.M.NewObject(id, n, align, x, len(b), cap(b))
		if v != nil {
			s.record(v)
			return SharedObj{}, false
		}
		o := SharedObj{B: b, Cache: id, Inc: end}
		j.add(oracle.Call{Kind: kind, Begin: begin, End: end, Who: who(id)}, obj, o)
		return o, true
	}
	if v := s.M.Alloc(id, n, align, x, len(b), cap(b), oracle.OK); v != nil {
		s.record(v)
		return SharedObj{}, false
	}
	full := b[:cap(b)]
	checked := full
	if mutant.SharedZeroLen {
		checked = b
	}
	if !uniform(checked, 0) {
		s.record(violation(spec.RuleZeroed, "Alloc(%d) = %#x is not zeroed", n, x))
	}
	fillWith(full, fill)
	o := SharedObj{B: b, Fill: fill, Cache: id, Inc: end}
	s.live[x] = o
	return o, true
}

func (j *judgement) add(c oracle.Call, obj oracle.Object, held SharedObj) int {
	j.calls = append(j.calls, c)
	j.objs = append(j.objs, obj)
	j.held = append(j.held, held)
	j.covering = append(j.covering, nil)
	return len(j.calls) - 1
}

// startFree begins a free (or moving Realloc, verb says which) of o, which
// the caller holds and whose address is not judged later: o must be live and
// keep its fill (INTEGRITY); the model counts it freed, and the call is
// recorded as in flight on its address, where a racing stale free finds it.
// Under mu.
func (s *Shared) startFree(id int, o SharedObj, begin uint64, verb string) *freeing {
	x := addr(o.B)
	held, ok := s.live[x]
	if !ok || held.Inc != o.Inc {
		panic(fmt.Sprintf("invariants: a driver %s %#x, which it does not hold", verb, x))
	}
	o = held // Shared's record: Fill and Mixed as Settle left them
	whole := o.B[:cap(o.B)]
	if mutant.SharedIntegrityLen {
		whole = o.B
	}
	if !o.Mixed && !uniform(whole, o.Fill) {
		s.record(violation(spec.RuleIntegrity, "object %#x lost its fill %#x", x, o.Fill))
	}
	obj, _ := s.M.LiveAt(x)
	s.record(s.M.Free(id, x, oracle.OK))
	delete(s.live, x)
	f := &freeing{obj: obj, held: o, begin: begin, who: who(id)}
	s.freeing[x] = f
	return f
}

// ended takes f, which has ended, off the frees in flight, unless a free of
// a newer object at the same address has begun since: the allocator freed
// f's object before it handed the address out again, so only the newest free
// there can still be undecided, and it stays for judgeLater to find. Under mu.
func (s *Shared) ended(x uintptr, f *freeing) {
	if s.freeing[x] == f {
		delete(s.freeing, x)
	}
}

// at runs the hook, if any. Without mu.
func (s *Shared) at(p hookPoint, x uintptr) {
	if s.hook != nil {
		s.hook(p, x)
	}
}

// Free frees o, an object the caller holds, through c (nil: the Allocator). If
// its address is not judged later, o must be live and keep its fill, and the
// free must succeed.
func (s *Shared) Free(c *impl.Cache, id int, o SharedObj) {
	if c == nil {
		id = Front
	}
	x := addr(o.B)
	s.mu.Lock()
	begin := s.tick()
	var f *freeing
	j, call := s.later[x], 0
	if j != nil {
		call = j.add(oracle.Call{Kind: oracle.CallFree, Begin: begin, Who: who(id)}, oracle.Object{}, o)
	} else {
		f = s.startFree(id, o, begin, "frees")
	}
	s.mu.Unlock()
	s.at(hookCall, x)
	var err error
	if c == nil {
		err = s.A.Free(o.B)
	} else {
		err = c.Free(o.B)
	}
	s.at(hookReturn, x)
	s.mu.Lock()
	defer s.mu.Unlock()
	end := s.tick()
	if f != nil {
		s.ended(x, f)
		if f.j == nil {
			if err != nil && !(mutant.SharedFrontFreeErr && c == nil) { // REFINES: the Allocator's Free error passes
				s.record(violation(spec.RuleRefines, "Free of live object %#x by %s: %v%s", x, who(id), err, s.explain(x)))
			}
			return
		}
		j, call = f.j, f.call
	}
	j.calls[call].End, j.calls[call].Got = end, Kind(err)
}

// Realloc resizes o, an object the caller holds, to n bytes through c (nil:
// the Allocator), and fills the result with fill. In the safe order it is o's
// free (o leaves the Model first) and the result's allocation, except that a
// Realloc in place counts neither: it puts o back as the result. The result
// must hold o's fill in what it kept and zero after it (ZEROED, REFINES).
// If o's address is judged later it is not resized (ok false: o is still
// held); if it becomes so during the call, the call joins its judgment (in
// place, moved, or refused), and the result is Mixed.
func (s *Shared) Realloc(c *impl.Cache, id int, o SharedObj, n int, fill byte) (SharedObj, bool) {
	if c == nil {
		id = Front
	}
	x := addr(o.B)
	s.mu.Lock()
	if s.later[x] != nil {
		s.mu.Unlock()
		return o, false
	}
	begin := s.tick()
	f := s.startFree(id, o, begin, "reallocs")
	obj, o := f.obj, f.held
	s.mu.Unlock()
	s.at(hookCall, x)
	var r []byte
	var err error
	if c == nil {
		r, err = s.A.Realloc(o.B, n)
	} else {
		r, err = c.Realloc(o.B, n)
	}
	s.at(hookReturn, x)
	s.mu.Lock()
	defer s.mu.Unlock()
	end := s.tick()
	s.ended(x, f)
	y, got := addr(r), Kind(err)
	if f.j != nil { // x is judged later: so is what this call did to it
		call := &f.j.calls[f.call]
		call.End, call.Got = end, got
		switch {
		case got == oracle.OK && y == x:
			nobj, v := s.M.NewObject(id, n, 1, x, len(r), cap(r))
			s.record(v)
			call.Kind, f.j.objs[f.call] = oracle.CallKeep, nobj
			res := SharedObj{B: r, Cache: id, Inc: end, Mixed: true}
			f.j.held[f.call] = res
			return res, true
		case got == oracle.OK:
			// A free on x raced this call: what it copied may be another
			// object's, or nothing (guard mode never reads a quarantined one).
			o.Mixed = true
			return s.reallocated(id, n, r, o, fill, begin, end)
		case got == oracle.OutOfMemory || s.refused(id, n, got):
			call.Kind = oracle.CallNoop
		case got == oracle.DoubleFree || got == oracle.InvalidPointer:
			s.M.RefusedRealloc(n)
		}
		return SharedObj{}, false
	}
	switch {
	case got == oracle.OK && y == x: // in place: neither a free nor an allocation
		s.M.Unfree(obj)
		nobj, v := s.M.NewObject(id, n, 1, x, len(r), cap(r))
		if v != nil {
			s.record(v)
			s.M.Restore(obj)
			s.live[x] = o
			return SharedObj{}, false
		}
		s.M.Restore(nobj)
		s.checkKept(r, o, n)
		fillWith(r[:cap(r)], fill)
		res := SharedObj{B: r, Fill: fill, Cache: id, Inc: end}
		s.live[x] = res
		return res, true
	case got == oracle.OK:
		return s.reallocated(id, n, r, o, fill, begin, end)
	case got == oracle.OutOfMemory || s.refused(id, n, got):
		s.M.Unfree(obj)
		s.M.Restore(obj)
		s.live[x] = o
		return o, true
	}
	s.record(violation(spec.RuleRefines, "Realloc(%#x, %d) of a live object by %s: %v%s", x, n, who(id), err, s.explain(x)))
	return SharedObj{}, false
}

// refused reports whether got is the error Realloc(b, n) on cache id must
// return before it looks at b, which it leaves untouched
// (oracle.Model.ReallocRefusal). Under mu.
func (s *Shared) refused(id, n int, got oracle.Kind) bool {
	return got != oracle.OK && got == s.M.ReallocRefusal(id, n)
}

// explain is, for a violation at x in guard mode, what the allocator knows of
// the guarded object freed there (Allocator.ExplainAddr: the stacks that
// allocated and freed it), so that a failure that does not replay says which
// call freed what the harness held. It drops mu around the call, so that the
// harness's lock is never held while the allocator's central lock is waited
// for (ExplainAddr takes it).
// Under mu.
func (s *Shared) explain(x uintptr) string {
	s.mu.Unlock()
	defer s.mu.Lock()
	if e, ok := s.A.ExplainAddr(x); ok {
		return "\nthe allocator's record of the guarded object there: " + e.Error()
	}
	return ""
}

// reallocated enters the object a moving Realloc returned, as an allocation.
// Under mu.
func (s *Shared) reallocated(id, n int, r []byte, o SharedObj, fill byte, begin, end uint64) (SharedObj, bool) {
	y := addr(r)
	if j := s.later[y]; j != nil {
		obj, v := s.M.NewObject(id, n, 1, y, len(r), cap(r))
		if v != nil {
			s.record(v)
			return SharedObj{}, false
		}
		res := SharedObj{B: r, Cache: id, Inc: end, Mixed: true}
		j.add(oracle.Call{Kind: oracle.CallAlloc, Begin: begin, End: end, Who: who(id)}, obj, res)
		return res, true
	}
	if v := s.M.Alloc(id, n, 1, y, len(r), cap(r), oracle.OK); v != nil {
		s.record(v)
		return SharedObj{}, false
	}
	s.checkKept(r, o, n)
	fillWith(r[:cap(r)], fill)
	res := SharedObj{B: r, Fill: fill, Cache: id, Inc: end}
	s.live[y] = res
	return res, true
}

// checkKept verifies a Realloc's result: o's fill in the bytes it kept, zero
// after them up to cap (ZEROED). Under mu.
func (s *Shared) checkKept(r []byte, o SharedObj, n int) {
	keep := min(len(o.B), n)
	kept := r[:keep]
	if mutant.SharedKeptShort && keep > 0 { // REFINES, INTEGRITY: the last kept byte unchecked
		kept = r[:keep-1]
	}
	if (!o.Mixed || mutant.MixedKept) && !uniform(kept, o.Fill) {
		s.record(violation(spec.RuleRefines, "Realloc(%#x, %d) = %#x did not keep the first %d bytes", addr(o.B), n, addr(r), keep))
	}
	end := cap(r)
	if mutant.SharedKeptLen { // ZEROED: bytes past len after Realloc unchecked
		end = len(r)
	}
	if !uniform(r[keep:end], 0) {
		s.record(violation(spec.RuleZeroed, "Realloc(%#x, %d) = %#x: bytes past the %d kept are not zero", addr(o.B), n, addr(r), keep))
	}
}

// StaleFree frees b through c (nil: the Allocator): a slice the caller no
// longer holds, freed before, or any pointer into the reservation. Its outcome
// is judged at the next Settle, with every call on its address until then.
func (s *Shared) StaleFree(c *impl.Cache, id int, b []byte) {
	if c == nil {
		id = Front
	}
	x := addr(b)
	s.mu.Lock()
	begin := s.tick()
	j := s.judgeLater(x)
	call := j.add(oracle.Call{Kind: oracle.CallFree, Begin: begin, Who: who(id)}, oracle.Object{}, SharedObj{})
	if o, ok := s.M.Containing(x); ok && o.Addr != x && !mutant.InteriorNever {
		if held, ok := s.live[o.Addr]; ok {
			j.covering[call] = &held
		}
	}
	s.mu.Unlock()
	var err error
	if c == nil {
		err = s.A.Free(b)
	} else {
		err = c.Free(b)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	j.calls[call].End, j.calls[call].Got = s.tick(), Kind(err)
	// FREE-INVALID: inside an object live from before the call to after it.
	if cov := j.covering[call]; cov != nil {
		if held, ok := s.live[addr(cov.B)]; ok && held.Inc == cov.Inc {
			j.calls[call].Interior = true
		}
	}
}

// judgeLater makes x an address judged at the next Settle, taking the object
// live there, or being freed, out of the Model. Under mu.
func (s *Shared) judgeLater(x uintptr) *judgement {
	if j := s.later[x]; j != nil {
		return j
	}
	j := &judgement{}
	if o, ok := s.M.Forget(x); ok {
		j.before, j.beforeHeld = &o, s.live[x]
		delete(s.live, x)
	} else if f := s.freeing[x]; f != nil {
		// The free began while the object was live: judged with the rest.
		s.M.Unfree(f.obj)
		j.before, j.beforeHeld = &f.obj, f.held
		f.j, f.call = j, j.add(oracle.Call{Kind: oracle.CallFree, Begin: f.begin, Who: f.who}, oracle.Object{}, f.held)
	}
	s.later[x] = j
	return j
}

// Alive reports whether o, an object a driver holds, is still the live object
// at its address in the Model (a stale free may have freed it under its
// holder). Quiescent callers, after Settle.
func (s *Shared) Alive(o SharedObj) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	held, ok := s.live[addr(o.B)]
	return ok && held.Inc == o.Inc
}

// alive keeps the objects of objs that are still live (Alive).
func alive(sh *Shared, objs []SharedObj) []SharedObj {
	out := objs[:0]
	for _, o := range objs {
		if sh.Alive(o) {
			out = append(out, o)
		}
	}
	return out
}

// Settle judges every address whose judgment was put off, at a quiescent point:
// the calls on it must be explained by some order (oracle.JudgeAddress), and
// the snapshot picks which outcome happened; the Model takes it (Settle) and
// the survivor's bytes must be what its holder left (INTEGRITY, ZEROED).
// Drivers then drop the objects Alive says are gone.
func (s *Shared) Settle() {
	snap := s.A.Snapshot()
	live := Abstract(snap)
	s.mu.Lock()
	defer s.mu.Unlock()
	xs := make([]uintptr, 0, len(s.later))
	for x := range s.later {
		xs = append(xs, x)
	}
	sort.Slice(xs, func(a, b int) bool { return xs[a] < xs[b] })
	for _, x := range xs {
		j := s.later[x]
		delete(s.later, x)
		outs, v := oracle.JudgeAddress(j.before != nil, j.calls)
		if v != nil {
			v.Detail = fmt.Sprintf("address %#x: %s", x, v.Detail)
			s.record(v)
			continue
		}
		// The outcomes the snapshot shows. Of several (their calls overlapped,
		// and they leave objects of one size), the bytes say which: the first,
		// from the object handed out last, that they fit (a Mixed one fits any).
		heldBy := func(o oracle.Outcome) SharedObj {
			switch o.Live {
			case oracle.LiveNone:
				return SharedObj{}
			case oracle.LiveBefore:
				return j.beforeHeld
			}
			return j.held[o.Live]
		}
		fits := func(h SharedObj) bool {
			whole := h.B[:cap(h.B)]
			if mutant.SettleFitsLen {
				whole = h.B
			}
			if mutant.SettleZeroSkip && len(h.B) == 0 { // INTEGRITY: a survivor of length 0 taken for none
				return true
			}
			return h.B == nil || h.Mixed || uniform(whole, h.Fill)
		}
		var cands []int
		for i, o := range outs {
			usable, isLive := live[x]
			switch {
			case o.Live == oracle.LiveNone && (!isLive || mutant.SettleLiveNone): // REFINES: nothing live fits whatever the snapshot shows
			case o.Live == oracle.LiveBefore && isLive && (usable == j.before.Usable || mutant.SettleUsableIgnored):
			case o.Live >= 0 && isLive && usable == j.objs[o.Live].Usable:
			default:
				continue
			}
			cands = append(cands, i)
		}
		if len(cands) == 0 {
			s.record(violation(spec.RuleRefines, "address %#x: the snapshot shows %v, which no order of its calls leaves:%s",
				x, liveness(live, x), describeCalls(j.calls)))
			continue
		}
		if !mutant.SettlePickFirst { // REFINES: the candidates tried in call order, the object handed out first
			sort.Slice(cands, func(a, b int) bool { return outs[cands[a]].Live > outs[cands[b]].Live })
		}
		pick := cands[0]
		for _, i := range cands {
			if fits(heldBy(outs[i])) {
				pick = i
				break
			}
		}
		o := outs[pick]
		s.M.Settle(x, j.before, j.calls, j.objs, o)
		if o.Live == oracle.LiveNone {
			continue
		}
		held := heldBy(o)
		if !fits(held) {
			rule := spec.RuleIntegrity
			if held.Fill == 0 {
				rule = spec.RuleZeroed
			}
			s.record(violation(rule, "object %#x, live after stale frees on it, does not hold %#x (outcome %v, usable %d):%s", x, held.Fill, o, live[x], describeCalls(j.calls)))
		}
		if held.Mixed || held.Fill == 0 {
			// Its bytes are known from now on, and not zero, which a write
			// of the allocator's could leave: Free, Realloc and CheckFills
			// check them (they read Fill and Mixed from s.live, not from the
			// holder's copy).
			fillWith(held.B[:cap(held.B)], survivorFill)
			held.Fill, held.Mixed = survivorFill, false
		}
		s.live[x] = held
	}
}

// survivorFill is what Settle fills a survivor with whose bytes it could
// not know (Mixed) or that had to read zero.
const survivorFill = 0x5a

func liveness(live map[uintptr]int, x uintptr) string {
	if u, ok := live[x]; ok {
		return fmt.Sprintf("an object of %d bytes live", u)
	}
	return "nothing live"
}

func describeCalls(calls []oracle.Call) string {
	var b bytes.Buffer
	from := max(0, len(calls)-40)
	if from > 0 {
		fmt.Fprintf(&b, "\n  (%d earlier calls)", from)
	}
	for i, c := range calls[from:] {
		fmt.Fprintf(&b, "\n  %d: %v", from+i, c)
	}
	return b.String()
}

// CheckFills verifies that every live object still holds its fill (INTEGRITY):
// objects nobody frees are checked too. Quiescent callers.
func (s *Shared) CheckFills() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for x, o := range s.live {
		whole := o.B[:cap(o.B)]
		if mutant.SharedCheckFillsLen {
			whole = o.B
		}
		if !o.Mixed && !uniform(whole, o.Fill) {
			s.record(violation(spec.RuleIntegrity, "live object %#x no longer holds its fill %#x", x, o.Fill))
		}
	}
}

// BadFree frees, through c, a pointer that is invalid whatever other goroutines
// do: a Go heap pointer or another Allocator's object (kind 0 or 1).
func (s *Shared) BadFree(c *impl.Cache, id int, kind, pick int) {
	var b []byte
	switch kind % 2 {
	case 0:
		b = make([]byte, 1+pick%64)
	case 1:
		f, err := s.other.Alloc(1 + pick%64)
		if (err != nil) != mutant.BadFreeSkip {
			return
		}
		defer s.other.Free(f)
		b = f
	}
	var err error
	if c == nil {
		id = Front
		err = s.A.Free(b)
	} else {
		err = c.Free(b)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.record(s.M.Free(id, addr(b), Kind(err)))
}

// Check settles the addresses judged later, verifies every live object's fill
// and runs Check (or CheckFlushed) on a snapshot; quiescent callers only.
func (s *Shared) Check(flushed bool) {
	s.Settle()
	s.CheckFills()
	snap := s.A.Snapshot()
	s.mu.Lock()
	defer s.mu.Unlock()
	if !mutant.SharedPoisonFlushed || flushed { // DEBUG-POISON: only flushed checks see a write after free
		s.record(NoFalsePoison(snap)...)
	}
	if flushed {
		s.exact++
		s.record(CheckFlushed(snap, s.M)...)
	} else {
		s.record(Check(snap, s.M)...)
	}
}

// ExactChecks counts the Checks of a flushed snapshot so far (STATS-EXACT):
// a driver's tests ask it whether the driver ever flushed to check.
func (s *Shared) ExactChecks() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.exact
}

// uniform reports whether every byte of b is x: b[0] == x and b equals itself
// shifted by one, which memequal does at memory speed.
func uniform(b []byte, x byte) bool {
	if mutant.UniformEnds { // INTEGRITY: only the first and last bytes compared
		return len(b) == 0 || b[0] == x && b[len(b)-1] == x
	}
	return len(b) == 0 || b[0] == x && bytes.Equal(b[1:], b[:len(b)-1])
}

func fillWith(b []byte, x byte) {
	if len(b) == 0 {
		return
	}
	b[0] = x
	for n := 1; n < len(b); n *= 2 {
		copy(b[n:], b[:n])
	}
}
