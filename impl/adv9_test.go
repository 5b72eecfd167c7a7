package impl_test

import (
	"encoding/json"
	"expvar"
	"fmt"
	"sync/atomic"
	"testing"

	"github.com/refalloc/refalloc/impl"
	"github.com/refalloc/refalloc/impl/expvarstats"
)

var expvarNames atomic.Int64

// readVar decodes the published variable name as generic JSON.
func readVar(t *testing.T, name string) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal([]byte(expvar.Get(name).String()), &m); err != nil {
		t.Fatal(err)
	}
	return m
}

// TestExpvarPublishLive (LARGE-EXACT), of package expvarstats but here, where
// cmd/mutants runs it (mutant expvarstale): every read of the variable is a fresh Stats,
// not the one Publish saw: a large allocation made after Publish shows at the
// next read, and its free at the one after, with no flush in between.
func TestExpvarPublishLive(t *testing.T) {
	a, err := impl.New(impl.Options{Reserve: 4 << 20})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	name := fmt.Sprintf("refalloc_adv9_live_%d", expvarNames.Add(1)) // -count=N publishes anew
	expvarstats.Publish(name, a)
	if m := readVar(t, name); m["large_live_objects"] != 0.0 || m["large_allocs"] != 0.0 {
		t.Fatalf("before: %v", m)
	}
	big, err := a.Alloc(200_000)
	if err != nil {
		t.Fatal(err)
	}
	if m := readVar(t, name); m["large_live_objects"] != 1.0 || m["large_allocs"] != 1.0 || m["large_live_bytes"] == 0.0 {
		t.Errorf("after the allocation: %v", m)
	}
	a.Free(big)
	if m := readVar(t, name); m["large_live_objects"] != 0.0 || m["large_frees"] != 1.0 {
		t.Errorf("after the free: %v", m)
	}
}
