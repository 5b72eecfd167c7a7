//go:build refalloc_mutant_nodoublefreecheck

package mutant

// NoDoubleFreeCheck: the owner's double-free check on the free fast path is skipped (FREE-DOUBLE).
const NoDoubleFreeCheck = true
