package expvarstats_test

import (
	"encoding/json"
	"expvar"
	"fmt"
	"maps"
	"slices"
	"sync/atomic"
	"testing"

	"github.com/refalloc/refalloc/impl"
	"github.com/refalloc/refalloc/impl/expvarstats"
)

var names atomic.Int64

// read decodes the published variable name as generic JSON.
func read(t *testing.T, name string) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal([]byte(expvar.Get(name).String()), &m); err != nil {
		t.Fatal(err)
	}
	return m
}

// TestPublishedNames: the variable's fields are published under the names the
// package comment documents (a dashboard reads them by name; a Go client
// decoding into Vars would not notice a renamed tag).
func TestPublishedNames(t *testing.T) {
	a, err := impl.New(impl.Options{Reserve: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	b, _ := a.Alloc(100)
	defer a.Free(b)
	name := fmt.Sprintf("refalloc_adv9_names_%d", names.Add(1)) // -count=N publishes anew
	expvarstats.Publish(name, a)
	m := read(t, name)
	want := []string{"classes", "large_allocs", "large_frees", "large_live_objects", "large_live_bytes",
		"double_frees", "invalid_frees", "write_after_frees", "superblock_cache_misses",
		"reserved_bytes", "committed_bytes", "in_use_bytes"}
	slices.Sort(want)
	if got := slices.Sorted(maps.Keys(m)); !slices.Equal(got, want) {
		t.Errorf("fields %v\nwant %v", got, want)
	}
	cl, ok := m["classes"].([]any)
	if !ok || len(cl) != 1 {
		t.Fatalf("classes %v", m["classes"])
	}
	c := cl[0].(map[string]any)
	wantClass := []string{"allocs", "class", "frees", "live_upper_bound", "size"}
	if got := slices.Sorted(maps.Keys(c)); !slices.Equal(got, wantClass) {
		t.Errorf("class fields %v\nwant %v", got, wantClass)
	}
	// allocs leads by what the cache holds (STATS-LEAD)
	if c["size"] != 112.0 || c["allocs"].(float64) < 1 || c["live_upper_bound"] != c["allocs"].(float64)-c["frees"].(float64) ||
		m["reserved_bytes"] != float64(1<<20) {
		t.Errorf("published %v", m)
	}
}
