package impl_test

// From the adv11 mutant hunt: each test names the one-line slip that passed
// the suite before it.

import (
	"testing"
	"time"

	"github.com/refalloc/refalloc/impl"
)

// TestDecayTimerSparesExactlyRetain (MEM-ACCOUNT, Options.Retain): the pool
// keeps up to Retain bytes of committed empty superblocks for good. A release
// past Retain arms the decay timer; if the pool is back to exactly Retain when
// the timer fires, nothing is past Retain and nothing goes back, however long
// it has waited (slip: the timer's function walks the pool when it holds
// Retain or more, not more than Retain, and returns it down to half of Retain).
func TestDecayTimerSparesExactlyRetain(t *testing.T) {
	const retain = 4
	a, err := impl.New(impl.Options{Reserve: 16 * sbBytes, Retain: retain * sbBytes, Decay: time.Hour})
	must(t, err)
	defer a.Close()
	clock := time.Now().UnixNano()
	impl.SetClock(a, func() int64 { return clock })
	c, _ := a.NewCache()
	var objs [][]byte
	for range retain + 1 {
		objs = append(objs, allocSBs(t, c, 1))
	}
	for _, b := range objs {
		must(t, c.Free(b))
	}
	if h := held(a); h != (retain+1)*sbBytes {
		t.Fatalf("%d superblocks freed within the decay: the pool holds %d bytes committed, want all of them", retain+1, h)
	}
	again := allocSBs(t, c, 1) // from the pool: back to exactly Retain
	if h := held(a); h != retain*sbBytes {
		t.Fatalf("one superblock taken back from the pool: it holds %d bytes committed, want Retain, %d", h, retain*sbBytes)
	}
	clock += 2 * int64(time.Hour)
	if !impl.FireDecayTimer(a) {
		t.Fatal("no decay timer pending after a release past Retain")
	}
	if h := held(a); h != retain*sbBytes {
		t.Fatalf("the decay timer fired with exactly Retain pooled: the pool holds %d bytes committed, want all %d of Retain kept", h, retain*sbBytes)
	}
	must(t, c.Free(again))
}
