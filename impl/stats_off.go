//go:build refalloc_nostats

package impl

// ClassCounters: see stats_on.go.
const ClassCounters = false
