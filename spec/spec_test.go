package spec

import (
	"bytes"
	"os"
	"testing"

	"github.com/refalloc/refalloc/spec/internal/classgen"
)

// TestNoDrift regenerates sizeclasses.go and fails on any difference, so the table
// can only change through its generator and its stated constraints.
func TestNoDrift(t *testing.T) {
	want, err := classgen.Generate()
	if err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile("sizeclasses.go")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatal("sizeclasses.go has drifted from its generator: run `go generate ./spec`")
	}
}

func TestSizeToClass(t *testing.T) {
	for n := 0; n <= MaxSmall; n++ {
		k := SizeToClass(n)
		if ClassSize(k) < n {
			t.Fatalf("SizeToClass(%d) = %d of size %d: too small", n, k, ClassSize(k))
		}
		if k > 0 && ClassSize(k-1) >= n {
			t.Fatalf("SizeToClass(%d) = %d but class %d of size %d fits", n, k, k-1, ClassSize(k-1))
		}
	}
}

func TestClassInvariants(t *testing.T) {
	for k := range NumClasses {
		s := ClassSize(k)
		if s > 8 && s%16 != 0 {
			t.Errorf("class %d size %d is not a multiple of 16", k, s)
		}
		if ClassObjects(k) != SuperblockSize/s {
			t.Errorf("class %d: objects %d, want %d", k, ClassObjects(k), SuperblockSize/s)
		}
		for off := 0; off < SuperblockSize; off++ {
			if got := int(uint64(off) * uint64(ClassDivMagic(k)) >> 32); got != off/s {
				t.Fatalf("class %d: magic index of %d = %d, want %d", k, off, got, off/s)
			}
		}
	}
}

// TestAlign checks ALIGN's table side: AlignedClass picks the smallest class that
// fits and is aligned, for every size class boundary and alignment.
func TestAlign(t *testing.T) {
	for align := 1; align <= MaxAlign; align <<= 1 {
		for n := 0; n <= MaxSmall; n += 1 + n/64 {
			k := AlignedClass(n, align)
			if k == Large {
				if align <= MaxSmall && n <= MaxSmall {
					t.Fatalf("AlignedClass(%d, %d) = Large, but the power-of-two class %d exists", n, align, max(n, align))
				}
				continue
			}
			if ClassSize(k) < n || ClassAlign(k) < align {
				t.Fatalf("AlignedClass(%d, %d) = class %d (size %d, align %d)", n, align, k, ClassSize(k), ClassAlign(k))
			}
			if j := SizeToClass(n); j < k && ClassAlign(j) >= align {
				t.Fatalf("AlignedClass(%d, %d) = %d skips aligned class %d", n, align, k, j)
			}
		}
	}
	for _, a := range []int{0, -1, 3, 12, MaxAlign * 2} {
		if ValidAlign(a) {
			t.Errorf("ValidAlign(%d) = true", a)
		}
	}
}
