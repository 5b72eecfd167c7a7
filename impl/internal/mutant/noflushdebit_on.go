//go:build refalloc_mutant_noflushdebit

package mutant

// NoFlushDebit: Flush gives held objects back without debiting Allocs (STATS-LEAD, STATS-EXACT).
const NoFlushDebit = true
