//go:build refalloc_mutant_remoteintolocal

package mutant

// RemoteIntoLocal: a remote free is put into the freeing cache as if it owned the superblock (ownership, CONSERVE).
const RemoteIntoLocal = true
