//go:build refalloc_mutant_capacitycredit

package mutant

// CapacityCredit: refill credits the group's capacity instead of the objects it moved (the published over-count of STATS-LEAD).
const CapacityCredit = true
