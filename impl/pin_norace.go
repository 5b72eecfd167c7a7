//go:build !race

package impl

// pinSync: outside -race builds the per-P fast path relies on the P: see
// front.go.
const pinSync = false
