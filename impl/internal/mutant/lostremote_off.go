//go:build !refalloc_mutant_lostremote

package mutant

const LostRemote = false

func Drop() bool { return false }
