//go:build !refalloc_nostats

package impl

// ClassCounters is false in the refalloc_nostats build, which compiles the
// per-class Allocs and Frees counters out to measure what they cost: there
// every Stats.Classes row reads 0 in those two fields. Everything else (the
// byte and superblock figures, the large objects' counts, the bad-free and
// cache-miss events) is counted in both builds.
const ClassCounters = true
