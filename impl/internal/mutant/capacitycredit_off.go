//go:build !refalloc_mutant_capacitycredit

package mutant

const CapacityCredit = false
