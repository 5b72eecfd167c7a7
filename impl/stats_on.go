//go:build !refalloc_nostats

package impl

// statsEnabled: the refalloc_nostats build tag compiles the counters out, to
// measure what they cost.
const statsEnabled = true
