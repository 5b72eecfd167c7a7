//go:build !refalloc_mutant_staleowner

package mutant

const StaleOwner = false
