// racehandoff hands a refalloc block from one goroutine to another, either with
// the writes ordered before the handoff (-handoff=sync) or racing with the reader
// (-handoff=racy). Run under -race, the detector must report the racy one: the
// payload lives in a Go-heap arena in -race builds, so the detector sees it.
//
// -handoff=reuse and -handoff=afterfree go through the Allocator's own methods
// on one P: a goroutine frees a block and another one allocates it again from
// the same per-P cache. In reuse the first one wrote before its free, which
// the detector must accept (the per-P cache's token orders the two, as the P
// does without -race); in afterfree it writes after its free, which races with
// the next owner and must be reported. -handoff=aligned is reuse with an
// AllocAligned of b's class on the first goroutine after its free of b:
// its pop too is ordered by the token, and must not be reported.
//
// Built with -tags refalloc_yield it has more modes (yieldmodes.go), which
// pause a goroutine at a yield point to set up their state.
package main

import (
	"flag"
	"fmt"
	"os"
	"runtime"

	"github.com/refalloc/refalloc/impl"
)

// yieldModes are the modes of the refalloc_yield build (yieldmodes.go).
var yieldModes = map[string]func(*impl.Allocator){}

func main() {
	handoff := flag.String("handoff", "sync", "sync, racy, reuse, afterfree, aligned, or one of yieldmodes.go's")
	flag.Parse()
	a, err := impl.New(impl.Options{Reserve: 1 << 20})
	if err != nil {
		fmt.Println(err)
		os.Exit(2)
	}
	switch *handoff {
	case "reuse", "afterfree", "aligned":
		front(a, *handoff == "afterfree", *handoff == "aligned")
		fmt.Println("backend ok")
		return
	case "sync", "racy":
	default:
		f, ok := yieldModes[*handoff]
		if !ok {
			fmt.Printf("-handoff=%s: no such mode in this build (the yield modes need -tags refalloc_yield)\n", *handoff)
			os.Exit(2)
		}
		f(a)
		fmt.Println("backend ok")
		return
	}
	c, _ := a.NewCache()
	b, _ := c.Alloc(64)
	ch := make(chan []byte)
	done := make(chan byte)
	go func() {
		r := <-ch
		done <- r[7]
	}()
	if *handoff == "racy" {
		ch <- b
		b[7] = 42 // after the handoff: races with the reader
	} else {
		b[7] = 42
		ch <- b
	}
	<-done
	c.Free(b)
	fmt.Println("backend ok")
}

// front frees a block on one goroutine and allocates it again on another, on
// one P, through the Allocator's methods; the two goroutines do not
// synchronize otherwise (the second only polls a flag the race detector does
// not see: an unsynchronized spin on a channel length).
func front(a *impl.Allocator, afterFree, aligned bool) {
	runtime.GOMAXPROCS(1)
	keep, _ := a.Alloc(64) // the superblock stays, with b's slot reused
	w, _ := a.Alloc(64)
	a.Free(w) // fills the superblock-cache entry: b's free below is a fast-path one
	b, _ := a.Alloc(64)
	freed := make(chan struct{}, 1)
	done := make(chan byte)
	go func() {
		for len(freed) == 0 { // no happens-before edge: len is not a receive
			runtime.Gosched()
		}
		var others [][]byte
		r, _ := a.Alloc(64)
		for &r[0] != &b[0] { // the cache comes round to b's slot
			if len(others) == 4096 {
				fmt.Println("the block was not reused: test broken")
				os.Exit(3)
			}
			others = append(others, r)
			r, _ = a.Alloc(64)
		}
		done <- r[7]
		a.Free(r)
		for _, o := range others {
			a.Free(o)
		}
	}()
	var x []byte
	if afterFree {
		a.Free(b)
		freed <- struct{}{}
		b[7] = 42 // a write after free: races with the next owner
	} else {
		b[7] = 42
		a.Free(b)
		if aligned { // the last use of the P's cache before the other goroutine's, of b's class
			x, _ = a.AllocAligned(64, 64)
		}
		freed <- struct{}{}
	}
	<-done
	a.Free(keep)
	if x != nil {
		a.Free(x)
	}
}
