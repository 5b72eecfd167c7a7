//go:build !refalloc_mutant_stalesbcache

package mutant

const StaleSBCache = false
