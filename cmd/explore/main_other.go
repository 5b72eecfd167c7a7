//go:build !refalloc_yield

package main

import (
	"fmt"
	"os"
)

// Without the yield points there is nothing to explore.
func main() {
	fmt.Fprintln(os.Stderr, "explore: build with -tags refalloc_yield")
	os.Exit(2)
}
