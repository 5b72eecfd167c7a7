//go:build refalloc_mutant_nozero

package mutant

// NoZero: a reused object is not zeroed (ZEROED).
const NoZero = true
