package impl_test

import (
	"testing"

	"golang.org/x/sys/unix"
)

// BenchmarkMadvise is the measurement behind the choice of MADV_DONTNEED in
// backend_mmap.go: one cycle dirties a 64 KiB superblock (every page), gives it
// back, and touches it again as a reuse would. It also reports how much of the
// superblock is still resident right after the madvise.
func BenchmarkMadvise(b *testing.B) {
	for _, adv := range []struct {
		name string
		flag int
	}{{"DONTNEED", unix.MADV_DONTNEED}, {"FREE", unix.MADV_FREE}} {
		b.Run(adv.name, func(b *testing.B) {
			m, err := unix.Mmap(-1, 0, 64<<10, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANON)
			if err != nil {
				b.Fatal(err)
			}
			defer unix.Munmap(m)
			var stillResident int
			for b.Loop() {
				for i := 0; i < len(m); i += 4096 {
					m[i] = 1
				}
				if err := unix.Madvise(m, adv.flag); err != nil {
					b.Fatal(err)
				}
				if m[0] != 0 { // MADV_FREE keeps the old contents until the kernel reclaims
					stillResident++
				}
			}
			b.ReportMetric(float64(stillResident)/float64(b.N), "dirty-after/op")
		})
	}
}
