//go:build refalloc_mutant_lostremote

package mutant

import "sync/atomic"

// LostRemote: one remote free in 64 is dropped (CONSERVE, REFINES).
const LostRemote = true

var remoteFrees atomic.Uint64

// Drop reports whether this remote free is the one in 64 to lose.
func Drop() bool { return remoteFrees.Add(1)%64 == 0 }
