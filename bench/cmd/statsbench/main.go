// Command statsbench measures what refalloc's statistics counters cost. The
// allocbench runner builds it twice, with and without -tags refalloc_nostats,
// and runs the two builds alternately; the ratio of their times per group is
// the overhead. Three groups, as in the batched-counters design note: each
// iteration allocates 64 objects through one Cache and frees them in order;
// small is 32 B, medium 4 KiB, mixed 16–16383 B drawn from an LCG.
//
// Output: one JSON line, {"stats":bool,"groups":{"small":[ns per alloc+free
// pair, one per round],...}}. "stats" says whether the counters moved, so the
// runner can tell that the build tag took effect.
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"runtime"
	"time"

	"github.com/refalloc/refalloc/impl"
)

const batch = 64

type group struct {
	name  string
	iters *int
	size  func(lcg *uint64) int
}

func main() {
	rounds := flag.Int("rounds", 7, "rounds; the groups alternate within each round")
	small := flag.Int("small-iters", 40000, "iterations of 64 objects per round, small group")
	medium := flag.Int("medium-iters", 8000, "iterations per round, medium group")
	mixed := flag.Int("mixed-iters", 4000, "iterations per round, mixed group")
	flag.Parse()
	runtime.GOMAXPROCS(1)

	groups := []group{
		{"small", small, func(*uint64) int { return 32 }},
		{"medium", medium, func(*uint64) int { return 4096 }},
		{"mixed", mixed, func(x *uint64) int {
			*x = *x*6364136223846793005 + 1442695040888963407
			return 16 + int((*x>>33)%(16384-16))
		}},
	}
	a, err := impl.New(impl.Options{})
	if err != nil {
		fail(err)
	}
	c, err := a.NewCache()
	if err != nil {
		fail(err)
	}
	out := struct {
		Stats  bool                 `json:"stats"`
		Groups map[string][]float64 `json:"groups"`
	}{Groups: map[string][]float64{}}
	objs := make([][]byte, batch)
	// Warm-up: every class the groups use has its superblocks before timing.
	for _, g := range groups {
		loop(c, objs, g, 100)
	}
	for range *rounds {
		for _, g := range groups {
			t0 := time.Now()
			loop(c, objs, g, *g.iters)
			ns := float64(time.Since(t0).Nanoseconds()) / float64(*g.iters*batch)
			out.Groups[g.name] = append(out.Groups[g.name], ns)
		}
	}
	if err := c.Close(); err != nil {
		fail(err)
	}
	for _, cs := range a.Stats().Classes {
		out.Stats = out.Stats || cs.Allocs > 0
	}
	if err := a.Close(); err != nil {
		fail(err)
	}
	data, _ := json.Marshal(out)
	fmt.Println(string(data))
}

func loop(c *impl.Cache, objs [][]byte, g group, iters int) {
	lcg := uint64(4141)
	for range iters {
		for i := range objs {
			b, err := c.Alloc(g.size(&lcg))
			if err != nil {
				fail(err)
			}
			b[0] = 1
			objs[i] = b
		}
		for _, b := range objs {
			if err := c.Free(b); err != nil {
				fail(err)
			}
		}
	}
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "statsbench:", err)
	os.Exit(1)
}
