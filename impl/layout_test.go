package impl

import (
	"testing"
	"unsafe"
)

// TestCacheLinesAligned: the superblock cache's 64-byte entries start cache
// lines, as the layout of Cache assumes of the Go heap (see its sbc field).
func TestCacheLinesAligned(t *testing.T) {
	a, err := New(Options{Reserve: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	for range 8 {
		c, _ := a.NewCache()
		if off := uintptr(unsafe.Pointer(&c.sbc[0])) % 64; off != 0 {
			t.Fatalf("the superblock cache starts %d bytes into a line", off)
		}
	}
	for _, c := range a.frontCaches() {
		if off := uintptr(unsafe.Pointer(&c.sbc[0])) % 64; off != 0 {
			t.Fatalf("a front cache's superblock cache starts %d bytes into a line", off)
		}
	}
}
