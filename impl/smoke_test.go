package impl

import (
	"errors"
	"testing"
)

func TestSmoke(t *testing.T) {
	a, err := New(Options{Reserve: 64 << 20})
	if err != nil {
		t.Fatal(err)
	}
	c, _ := a.NewCache()
	d, _ := a.NewCache()
	var objs [][]byte
	for i := 0; i < 5000; i++ {
		b, err := c.Alloc(i % 3000)
		if err != nil {
			t.Fatal(i, err)
		}
		for j := range b[:cap(b)] {
			if b[:cap(b)][j] != 0 {
				t.Fatal("not zero")
			}
		}
		for j := range b {
			b[j] = 0xAA
		}
		objs = append(objs, b)
	}
	for i, b := range objs {
		f := c
		if i%2 == 0 {
			f = d
		}
		if err := f.Free(b); err != nil {
			t.Fatal(i, err)
		}
	}
	if err := c.Free(objs[1]); !errors.Is(err, ErrDoubleFree) {
		t.Fatal("want double free", err)
	}
	c.Flush()
	d.Flush()
	s := a.Stats()
	var al, fr uint64
	for _, cs := range s.Classes {
		al += cs.Allocs
		fr += cs.Frees
	}
	t.Logf("allocs %d frees %d double %d", al, fr, s.DoubleFrees)
	if al != 5000 || fr != 5000 {
		t.Fatal("stats not exact")
	}
	snap := a.Snapshot()
	for _, sb := range snap.Superblocks {
		if sb.Live != 0 {
			t.Fatal("live", sb)
		}
	}
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
}
