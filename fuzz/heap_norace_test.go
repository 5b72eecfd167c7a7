//go:build !race

package fuzz

const heapBackend = false
