//go:build cgo

package main

import "github.com/apache/arrow-go/v18/arrow/memory/mallocator"

// Arrow's cgo allocator (calloc/free), where a C compiler built this binary.
// (memory.NewCgoArrowAllocator would need the Arrow C++ library as well.)
func init() {
	allocKinds = append(allocKinds, allocKind{"mallocator", func() (allocator, error) {
		m := mallocator.NewMallocator()
		return allocator{mem: m, live: m.AllocatedBytes, close: func() error { return nil }}, nil
	}})
}
