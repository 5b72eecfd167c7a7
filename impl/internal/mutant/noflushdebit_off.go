//go:build !refalloc_mutant_noflushdebit

package mutant

const NoFlushDebit = false
