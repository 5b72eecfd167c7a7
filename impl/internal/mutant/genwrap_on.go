//go:build refalloc_mutant_genwrap

package mutant

// GenWrap: the 32-bit generation wraps without retiring the remote set, so an
// entry of an old era meets its generation again (CACHE-COHERENT).
const GenWrap = true
