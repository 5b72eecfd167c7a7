//go:build refalloc_mutant_counterwrap

package mutant

// CounterWrap: the Allocs counter of a cache is kept in 16 bits and wraps (STATS-LEAD).
const CounterWrap = true
