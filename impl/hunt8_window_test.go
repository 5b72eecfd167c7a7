//go:build refalloc_yield

package impl_test

import (
	"errors"
	"slices"
	"sync/atomic"
	"testing"

	"github.com/refalloc/refalloc/impl"
	"github.com/refalloc/refalloc/spec"
)

// pauseSeq stops the goroutine that reaches points[0], then, once let go, the
// one that next reaches points[1], and so on; every other yield passes.
type pauseSeq struct {
	points         []string
	stage          atomic.Int32
	paused, resume chan struct{}
}

func newPauseSeq(points ...string) *pauseSeq {
	return &pauseSeq{points: points, paused: make(chan struct{}), resume: make(chan struct{})}
}

func (p *pauseSeq) Yield(point string) {
	i := p.stage.Load()
	if int(i) < len(p.points) && point == p.points[i] && p.stage.CompareAndSwap(i, i+1) {
		p.paused <- struct{}{}
		<-p.resume
	}
}

func (p *pauseSeq) Bucket() uint32 { return 0 }

// duringEach runs op on a goroutine of its own, stopped at each of the
// scheduler's points in turn while the matching meanwhile runs, and returns
// its error.
func duringEach(t *testing.T, p *pauseSeq, op func() error, meanwhile ...func()) error {
	t.Helper()
	impl.SetScheduler(p)
	defer impl.SetScheduler(nil)
	done := make(chan error)
	go func() { done <- op() }()
	for i, f := range meanwhile {
		select {
		case <-p.paused:
		case err := <-done:
			t.Fatalf("the operation never reached %s (it returned %v)", p.points[i], err)
		}
		f()
		p.resume <- struct{}{}
	}
	return <-done
}

// adoptedOnStack builds the window in which a cache's drain pops a superblock
// another cache owns. c fills S (class 256: 8 groups) and its refill, paused
// after its first drain (YieldRefillAcquire), finds S announced on its stack
// by r's free of object 32; the refill's acquire orphans S (orphanFull), and
// its second drain pops S, paused there (YieldDrainPop) while d frees objects
// 33 to 47 (the first adopts S, collecting object 32; with 16 free, a
// sixteenth of S, S is partial: LIFECYCLE), allocates (object 32; objects 33
// to 47 are now d's held group), and r frees object 33 again: a remote double free of
// a held object, pending in group 1 only, that pushes nothing (S is still
// marked notified). It returns S's index and the double-freed object, with
// the drain done.
func adoptedOnStack(t *testing.T, a *impl.Allocator, c, r, d *impl.Cache) (int, []byte) {
	t.Helper()
	const size = 256
	k := spec.SizeToClass(size)
	var s [][]byte
	for range spec.ClassObjects(k) { // S full: the next Alloc refills
		s = append(s, allocN(t, c, size))
	}
	si := sbOf(a, s[0])
	var got []byte
	err := duringEach(t, newPauseSeq(impl.YieldRefillAcquire, impl.YieldDrainPop),
		func() error { _, err := c.Alloc(size); return err },
		func() { must(t, r.Free(s[32])) }, // pending in group 1, S on c's stack
		func() {
			must(t, d.Free(s[33])) // adopts S
			for _, b := range s[34:48] {
				must(t, d.Free(b)) // S partial
			}
			got = allocN(t, d, size)
			must(t, r.Free(s[33])) // accepted: found later
		})
	must(t, err)
	if st := sbState(t, a, si); addrOf(got) != addrOf(s[32]) || st.Owner != d.ID() || !st.Current {
		t.Fatalf("setup: d allocated %#x (want %#x), S owner %d current %v (want %d, true)",
			addrOf(got), addrOf(s[32]), st.Owner, st.Current, d.ID())
	}
	return si, s[33]
}

// TestDrainForwardsAdoptedToAdopter (FREE-DOUBLE: a remote double free is
// found when the owner collects it): a superblock popped from a cache's
// stack that another cache has adopted meanwhile is forwarded, not collected
// by the cache that popped it, which does not hold its held group: the
// double free of an object the adopter holds, pending, would be taken for a
// free, and the object handed out twice. Slip: drainNotify collects every
// popped superblock that has an owner, not only its own.
func TestDrainForwardsAdoptedToAdopter(t *testing.T) {
	var reports []error
	a, err := impl.New(impl.Options{Reserve: 64 * spec.SuperblockSize, OnError: func(err error) { reports = append(reports, err) }})
	must(t, err)
	defer a.Close()
	c, _ := a.NewCache()
	r, _ := a.NewCache()
	d, _ := a.NewCache()
	_, dup := adoptedOnStack(t, a, c, r, d)
	for _, x := range []*impl.Cache{c, r, d} {
		x.Flush()
	}
	var fe *impl.FreeError
	if len(reports) != 1 || !errors.As(reports[0], &fe) || !errors.Is(fe, impl.ErrDoubleFree) || fe.Addr != addrOf(dup) {
		t.Fatalf("reports %v, want the double free of %#x", reports, addrOf(dup))
	}
	if s := a.Stats(); s.DoubleFrees != 1 {
		t.Errorf("%d double frees counted, want 1", s.DoubleFrees)
	}
}

// TestForwardAnnouncesLaterGroups (CONSERVE: every superblock with pending
// remote frees has been announced): a superblock forwarded from a stack it no
// longer belongs on is announced again when any of its groups has a free
// pending, not only the first: here only group 1 has, and the forward pushes
// it onto its adopter's stack. Slip: remoteSet.pending reads group 0 only.
func TestForwardAnnouncesLaterGroups(t *testing.T) {
	a, err := impl.New(impl.Options{Reserve: 64 * spec.SuperblockSize, OnError: func(error) {}})
	must(t, err)
	defer a.Close()
	c, _ := a.NewCache()
	r, _ := a.NewCache()
	d, _ := a.NewCache()
	si, _ := adoptedOnStack(t, a, c, r, d)
	st := sbState(t, a, si)
	if st.Pending[0] != 0 || st.Pending[1] == 0 {
		t.Fatalf("setup: pending %#x, want group 1 only", st.Pending)
	}
	if !st.Notified {
		t.Errorf("S has remote frees pending (%#x) and is not announced", st.Pending)
	}
	for _, cs := range a.Snapshot().Caches {
		if cs.ID == d.ID() && !slices.Contains(cs.Notify, si) {
			t.Errorf("S is not on its owner's stack %v", cs.Notify)
		}
	}
}

// TestCollectTakesBitsSetMeanwhile (CONSERVE: every object is in exactly one
// place): a remote free into a group the owner is collecting, landing between
// the collection's read of the word and its clearing (YieldCollectSwap), is
// collected with the rest, not cleared unseen: the object would be neither
// free nor pending, live for good. Slip: collectWord clears the word by
// storing the value it read instead of swapping.
func TestCollectTakesBitsSetMeanwhile(t *testing.T) {
	a, err := impl.New(impl.Options{Reserve: 8 * spec.SuperblockSize})
	must(t, err)
	defer a.Close()
	c, _ := a.NewCache()
	d, _ := a.NewCache()
	const size = 256
	k := spec.SizeToClass(size)
	x, y, kept := allocN(t, c, size), allocN(t, c, size), allocN(t, c, size)
	must(t, d.Free(x)) // pending; S on c's stack
	err = during(t, newPause(impl.YieldCollectSwap),
		func() error { c.Flush(); return nil }, // the drain collects group 0
		func() { must(t, d.Free(y)) })          // same word, meanwhile
	must(t, err)
	c.Flush()
	d.Flush()
	if got := a.Stats().Classes[k].Frees; got != 2 {
		t.Errorf("every cache flushed: %d frees of class %d, want 2", got, k)
	}
	for _, l := range a.Leaks() {
		if l.Addr == addrOf(y) {
			t.Errorf("the object freed during the collection is still live")
		}
	}
	must(t, c.Free(kept))
}
