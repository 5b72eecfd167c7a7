//go:build !refalloc_portable

package impl_test

const portable = false
