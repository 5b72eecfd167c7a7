// racehandoff hands a refalloc block from one goroutine to another, either with
// the writes ordered before the handoff (-handoff=sync) or racing with the reader
// (-handoff=racy). Run under -race, the detector must report the racy one: the
// payload lives in a Go-heap arena in -race builds, so the detector sees it.
package main

import (
	"flag"
	"fmt"
	"os"

	"github.com/refalloc/refalloc/impl"
)

func main() {
	handoff := flag.String("handoff", "sync", "sync or racy")
	flag.Parse()
	a, err := impl.New(impl.Options{Reserve: 1 << 20})
	if err != nil {
		fmt.Println(err)
		os.Exit(2)
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
