package expvarstats_test

import (
	"encoding/json"
	"expvar"
	"fmt"
	"reflect"
	"testing"

	"github.com/refalloc/refalloc/impl"
	"github.com/refalloc/refalloc/impl/expvarstats"
)

func TestPublish(t *testing.T) {
	a, err := impl.New(impl.Options{Reserve: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	b, _ := a.Alloc(100)
	big, _ := a.Alloc(100_000)
	a.Free(b)
	a.Flush()
	name := fmt.Sprintf("refalloc_test_%d", names.Add(1)) // -count=N publishes anew
	expvarstats.Publish(name, a)
	var v expvarstats.Vars
	if err := json.Unmarshal([]byte(expvar.Get(name).String()), &v); err != nil {
		t.Fatal(err)
	}
	if len(v.Classes) != 1 || v.Classes[0].Size != 112 || v.Classes[0].Allocs != 1 || v.Classes[0].Frees != 1 ||
		v.LargeLiveObjects != 1 || v.LargeLiveBytes != 102400 || v.ReservedBytes != 1<<20 || v.InUseBytes == 0 {
		t.Fatalf("published %+v", v)
	}
	a.Free(big)
}

// TestFromStatsFields (STATS-LEAD, MEM-ACCOUNT): every field is published
// from its own Stats field, and a class with allocations but no frees yet is
// listed (its live_upper_bound is the one that matters most). Each value is
// distinct, so a field read from its neighbour shows.
func TestFromStatsFields(t *testing.T) {
	var s impl.Stats
	s.Classes = []impl.ClassStats{{Class: 1, Size: 16, Allocs: 5}, {Class: 2, Size: 32}, {Class: 3, Size: 48, Allocs: 9, Frees: 4}}
	s.Large.Allocs, s.Large.Frees, s.Large.LiveObjects, s.Large.LiveBytes = 11, 12, 13, 14
	s.DoubleFrees, s.InvalidFrees, s.WriteAfterFrees, s.SuperblockCacheMisses = 21, 22, 23, 24
	s.Reserved, s.Committed, s.InUse = 31, 32, 33
	v := expvarstats.FromStats(s)
	want := expvarstats.Vars{
		Classes:     []expvarstats.Class{{Class: 1, Size: 16, Allocs: 5, LiveUpperBound: 5}, {Class: 3, Size: 48, Allocs: 9, Frees: 4, LiveUpperBound: 5}},
		LargeAllocs: 11, LargeFrees: 12, LargeLiveObjects: 13, LargeLiveBytes: 14,
		DoubleFrees: 21, InvalidFrees: 22, WriteAfterFrees: 23, SuperblockCacheMisses: 24,
		ReservedBytes: 31, CommittedBytes: 32, InUseBytes: 33,
	}
	if !reflect.DeepEqual(v, want) {
		t.Errorf("FromStats = %+v\nwant %+v", v, want)
	}
}

// TestClassesIsAlwaysAnArray (STATS-EXACT's published form): the package doc
// describes "classes" as an array, one entry per class with activity; with no
// class active (a fresh Allocator, or every one in the refalloc_nostats build)
// it is the empty array, not null, so a consumer that iterates it
// (jq '.classes[]', a dashboard's for-each) does not fail (review28).
func TestClassesIsAlwaysAnArray(t *testing.T) {
	a, err := impl.New(impl.Options{Reserve: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	name := fmt.Sprintf("refalloc_test_%d", names.Add(1))
	expvarstats.Publish(name, a)
	var m map[string]json.RawMessage
	if err := json.Unmarshal([]byte(expvar.Get(name).String()), &m); err != nil {
		t.Fatal(err)
	}
	if got := string(m["classes"]); got != "[]" {
		t.Errorf(`published "classes": %s, want [] (no class active)`, got)
	}
	if v := expvarstats.FromStats(impl.Stats{}); v.Classes == nil {
		t.Errorf("FromStats(Stats{}).Classes is nil: published as null")
	}
}
