//go:build refalloc_yield

package impl_test

import (
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/refalloc/refalloc/impl"
)

// TestDeliverRacesDeliver (FREE-DOUBLE: a double free found late is
// reported through OnError, once): two calls end with reports' delivery at
// once. The first sees a report queued (deliver.load) and, before it takes
// the queue's lock, the second delivers it. The first must then find the
// queue empty and return. Slip: deliver takes the queue's first report
// without looking again under the lock whether one is left (deliverempty):
// it indexes an empty queue and panics, out of a call that did nothing wrong.
func TestDeliverRacesDeliver(t *testing.T) {
	var mu sync.Mutex
	var reports []error
	a, c1 := newAllocCache(t, impl.Options{OnError: func(err error) {
		mu.Lock()
		reports = append(reports, err)
		mu.Unlock()
	}})
	c2 := mustCache(t, a)
	x := allocN(t, c1, 24)
	must(t, c1.Free(x))
	must(t, c2.Free(x)) // remote: pending on an object free in c1's bitmap, a double free found when c1 collects
	err := during(t, newPause(impl.YieldDeliverLoad),
		func() (err error) {
			defer func() {
				if p := recover(); p != nil {
					err = fmt.Errorf("Flush panicked: %v", p)
				}
			}()
			c1.Flush() // collects the late double free, queues its report, delivers
			return nil
		},
		func() { c2.Flush() }) // delivers what c1's Flush queued
	if err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(reports) != 1 || !errors.Is(reports[0], impl.ErrDoubleFree) {
		t.Fatalf("OnError was given %v, want the one double free", reports)
	}
	must(t, c1.Close())
	must(t, c2.Close())
}
