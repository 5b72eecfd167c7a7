//go:build refalloc_yield

package fuzz

import (
	"testing"

	"github.com/refalloc/refalloc/invariants"
)

// byteChooser takes the explorer's decisions from the fuzzer's bytes (zero once
// they run out), so the fuzzer mutates schedules and operations alike.
type byteChooser struct {
	data []byte
	i    int
}

func (c *byteChooser) Intn(n int, _ string) int {
	v := 0
	for width := 1; width < n && width < 1<<16; width <<= 8 {
		if c.i < len(c.data) {
			v = v<<8 | int(c.data[c.i])
			c.i++
		}
	}
	return v % n
}

// FuzzExplore is the interleaving explorer (invariants.Explore) driven by the
// fuzzer's bytes: the configuration, each round's operations and, at every
// yield point inside impl, which goroutine goes on.
func FuzzExplore(f *testing.F) {
	f.Add([]byte{})
	f.Add([]byte{1, 7, 2, 3, 1, 0, 2, 1, 5, 0, 9, 9, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12})
	f.Fuzz(func(t *testing.T, data []byte) {
		ch := &byteChooser{data: data}
		res, err := invariants.Explore(ch, invariants.DrawExploreConfig(ch))
		if err != nil {
			t.Fatal(err)
		}
		if len(res.Violations) > 0 {
			t.Fatalf("%v\n%s", res.Violations, res.Trace)
		}
	})
}
