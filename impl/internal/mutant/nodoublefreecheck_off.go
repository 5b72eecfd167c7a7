//go:build !refalloc_mutant_nodoublefreecheck

package mutant

const NoDoubleFreeCheck = false
