//go:build !refalloc_mutant_remoteintolocal

package mutant

const RemoteIntoLocal = false
