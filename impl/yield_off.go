//go:build !refalloc_yield

package impl

// yieldPoints is false in every normal build: yield compiles to nothing and
// lockMu to a plain Lock.
const yieldPoints = false

func yield(point string) {}

func lockWait() bool { return false }

func schedBucket() (uint32, bool) { return 0, false }

func lockTaken(bool) {}
