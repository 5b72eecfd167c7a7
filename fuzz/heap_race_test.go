//go:build race

package fuzz

// In -race builds the payload is a Go-heap arena, and checkptr forbids pointer
// arithmetic that leaves it: FuzzBadFree keeps its addresses inside.
const heapBackend = true
