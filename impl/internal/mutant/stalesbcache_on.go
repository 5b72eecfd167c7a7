//go:build refalloc_mutant_stalesbcache

package mutant

// StaleSBCache: a remote free ignores the generation tag, so a superblock-cache entry survives the reuse of its superblock (CACHE-COHERENT).
const StaleSBCache = true
