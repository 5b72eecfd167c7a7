//go:build refalloc_yield

package invariants

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/refalloc/refalloc/impl"
	"github.com/refalloc/refalloc/spec"
)

// adv8Chooser takes an exploration's decisions from a seeded generator.
type adv8Chooser struct{ r *rand.Rand }

func (c adv8Chooser) Intn(n int, _ string) int { return c.r.IntN(n) }

func adv8Seeded(seed uint64) adv8Chooser { return adv8Chooser{rand.New(rand.NewPCG(seed, 8))} }

// TestExploreReach (FREE-DOUBLE, CACHE-COHERENT, FRONT-EXCLUSIVE: what
// TestExplore and FuzzExplore drive): DrawExploreConfig reaches 2 to 4
// workers, every way count, debug mode and not, both pools, the default Decay
// and none, two and three
// sizes, a large one; and plan reaches every operation Explore's comment
// lists: allocations and frees through the worker's cache and the
// Allocator's, a hand-off to another worker (a remote free), stale frees of a
// freed address, of a live object (double) and inside one, Realloc, a flush,
// a cache closed and reopened, Allocator.Flush and Allocator.Trim.
func TestExploreReach(t *testing.T) {
	workers, ways, sizes := map[int]bool{}, map[int]bool{}, map[int]bool{}
	var debug, nodebug, retain, noretain, large bool
	decays := map[time.Duration]bool{}
	for seed := range 300 {
		cfg := DrawExploreConfig(adv8Seeded(uint64(seed)))
		workers[cfg.Workers], ways[cfg.Options.SuperblockCacheWays], sizes[len(cfg.Sizes)] = true, true, true
		debug, nodebug = debug || cfg.Options.Debug, nodebug || !cfg.Options.Debug
		retain, noretain = retain || cfg.Options.Retain == 0, noretain || cfg.Options.Retain < 0
		decays[cfg.Options.Decay] = true
		for _, n := range cfg.Sizes {
			large = large || n > spec.MaxSmall
		}
	}
	for _, w := range []int{2, 3, 4} {
		if !workers[w] {
			t.Errorf("no exploration runs %d workers: %v", w, workers)
		}
	}
	for _, d := range []time.Duration{0, -1} {
		if !decays[d] {
			t.Errorf("no exploration runs Decay %v: %v", d, decays)
		}
	}
	for _, w := range []int{1, 8, 16, 32, 64, 128} {
		if !ways[w] {
			t.Errorf("no exploration runs %d superblock-cache ways", w)
		}
	}
	if !sizes[2] || !sizes[3] || !debug || !nodebug || !retain || !noretain || !large {
		t.Errorf("explorations draw sizes %v, debug %v/%v, Retain 0/-1 %v/%v, a large size %v; want all", sizes, debug, nodebug, retain, noretain, large)
	}

	sh, err := NewShared(impl.Options{Reserve: 16 * spec.SuperblockSize})
	if err != nil {
		t.Fatal(err)
	}
	defer sh.Close()
	c, id, err := sh.OpenCache()
	if err != nil {
		t.Fatal(err)
	}
	o, ok1 := sh.Alloc(c, id, 100, 1, 1)
	p, ok2 := sh.Alloc(c, id, 100, 1, 3)
	if !ok1 || !ok2 {
		t.Fatal("Alloc failed")
	}
	w, v := &eworker{c: c, id: id}, &eworker{}
	x := &explorer{ch: adv8Seeded(1), cfg: ExploreConfig{Sizes: []int{100}}, workers: []*eworker{w, v}}
	seen := map[string]bool{}
	for range 2000 {
		w.mine, w.freed = []SharedObj{o}, [][]byte{p.B} // p stands for a freed object: no op runs
		name := x.plan(sh, w).name
		if s, ok := strings.CutSuffix(name, " by the Allocator"); ok {
			seen["by the Allocator"], name = true, s
		}
		switch {
		case name == fmt.Sprintf("stale free %#x", addr(p.B)):
			name = "stale free of a freed address"
		case name == fmt.Sprintf("stale free %#x", addr(o.B)):
			name = "stale free of a live object"
		case strings.HasPrefix(name, "stale free "):
			name = "stale free inside a live object"
		case name == "nothing" && len(v.mine) > 0:
			name, v.mine = "hand-off", nil
		default:
			name, _, _ = strings.Cut(name, " 0x")
			name = strings.TrimRight(name, "0123456789 ")
		}
		seen[name] = true
	}
	for _, op := range []string{"alloc", "free", "hand-off", "stale free of a freed address", "stale free of a live object",
		"stale free inside a live object", "realloc", "flush", "close and reopen", "Allocator.Flush", "Allocator.Trim", "by the Allocator"} {
		if !seen[op] {
			t.Errorf("plan never draws %q (drew %v)", op, seen)
		}
	}
	sh.Free(c, id, o)
	sh.Free(c, id, p)
	sh.CloseCache(c, id)
	sh.A.Flush()
	sh.Settle()
	if vs := sh.Violations(); len(vs) > 0 {
		t.Fatal(vs[0])
	}
}
