//go:build ignore

// mksizeclasses writes sizeclasses.go from the constraints in spec/internal/classgen.
// Run it with `go generate ./spec` (or `go run mksizeclasses.go` in spec/).
package main

import (
	"log"
	"os"

	"github.com/refalloc/refalloc/spec/internal/classgen"
)

func main() {
	src, err := classgen.Generate()
	if err != nil {
		log.Fatal(err)
	}
	if err := os.WriteFile("sizeclasses.go", src, 0o644); err != nil {
		log.Fatal(err)
	}
}
