//go:build race

package main

// In -race builds refalloc reserves a Go-heap arena, whose pages Trim cannot
// hand back the way it does an mmap reservation.
const raceBuild = true
