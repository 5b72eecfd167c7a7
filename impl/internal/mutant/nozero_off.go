//go:build !refalloc_mutant_nozero

package mutant

const NoZero = false
