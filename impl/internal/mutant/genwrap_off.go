//go:build !refalloc_mutant_genwrap

package mutant

const GenWrap = false
