//go:build race

package impl

// pinSync: in -race builds the per-P fast path takes and releases its cache's
// token, so that the race detector sees the order of the goroutines that use
// a P's cache one after the other (front.go).
const pinSync = true
