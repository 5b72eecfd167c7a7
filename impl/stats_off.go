//go:build refalloc_nostats

package impl

const statsEnabled = false
