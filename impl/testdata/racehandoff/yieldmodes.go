//go:build refalloc_yield

package main

import (
	"fmt"
	"os"
	"runtime"

	"github.com/refalloc/refalloc/impl"
)

func init() {
	yieldModes["orphandrain"] = orphanDrain
}

// pauser stops the first goroutine that reaches the yield point at, until
// resumed. It orders only the setup: it is removed before the accesses the
// detector judges.
type pauser struct {
	at             string
	armed          chan struct{} // one token: the first arrival takes it
	paused, resume chan struct{}
}

func (p *pauser) Yield(point string) {
	if point != p.at {
		return
	}
	select {
	case <-p.armed:
		p.paused <- struct{}{}
		<-p.resume
	default:
	}
}

func (p *pauser) Bucket() uint32 { return 0 }

// orphanDrain (LIFECYCLE): a superblock S of cache x is orphaned while a
// remote free into it waits to announce it, so the announcement goes on the
// orphans' stack. Cache y adopts S by freeing into it, and files it on its
// lists outside the central lock. Then cache z, on a goroutine that has no
// happens-before edge to that filing (the lock was y's before it), drains the
// orphans' stack and finds S there, owned by y: it must not read S's list,
// which is y's now. Slip (adv16b 30, orphandrainlistfirst): the drain reads
// the list before the owner, which the detector reports.
func orphanDrain(a *impl.Allocator) {
	x, _ := a.NewCache()
	var objs [][]byte
	for range 8 {
		b, _ := x.Alloc(64)
		objs = append(objs, b)
	}
	w, _ := a.NewCache()
	p := &pauser{at: impl.YieldRemoteNotify, armed: make(chan struct{}, 1), paused: make(chan struct{}), resume: make(chan struct{})}
	p.armed <- struct{}{}
	impl.SetScheduler(p)
	freed := make(chan struct{})
	go func() {
		w.Free(objs[0]) // a remote free into S: stops before it announces S
		close(freed)
	}()
	<-p.paused
	x.Close() // S is an orphan, with objs[1:] live
	p.resume <- struct{}{}
	<-freed // the announcement went on the orphans' stack
	impl.SetScheduler(nil)
	if s := a.Snapshot(); len(s.OrphanNotify) != 1 {
		fmt.Println("the orphans' stack holds", s.OrphanNotify, "want S alone: test broken")
		os.Exit(3)
	}

	adopted := make(chan struct{}, 1)
	go func() {
		y, _ := a.NewCache()
		y.Free(objs[1]) // y adopts S, and files it on its lists outside the lock
		adopted <- struct{}{}
	}()
	for len(adopted) == 0 { // no happens-before edge: len is not a receive
		runtime.Gosched()
	}
	z, _ := a.NewCache()
	if b, err := z.Alloc(64); err != nil || len(b) != 64 { // a refill: acquire drains the orphans' stack
		fmt.Println("z.Alloc(64):", err)
		os.Exit(3)
	}
}
