//go:build refalloc_mutant_staleowner

package mutant

// StaleOwner: an owner does not invalidate its own entry when it releases a superblock, so "owned by me" survives the change of owner (CACHE-COHERENT).
const StaleOwner = true
