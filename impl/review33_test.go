package impl_test

import (
	"testing"

	"github.com/refalloc/refalloc/impl"
	"github.com/refalloc/refalloc/spec"
)

// TestGuardDecommitRefusedPoolsPoison (GUARD-FAULT, DEBUG-POISON): in debug
// and guard mode, a guarded object quarantined while the kernel refuses to
// decommit its memory keeps what the program wrote there (protected, but
// committed and dirty); when the quarantine releases it the superblock must
// be poisoned before it is pooled, or the next object there finds no poison
// and reports a write after free nobody made.
func TestGuardDecommitRefusedPoolsPoison(t *testing.T) {
	const sbs = 8
	var reports []error
	a, err := impl.New(impl.Options{Reserve: sbs * spec.SuperblockSize, Debug: true,
		Guard:   impl.GuardOptions{Enabled: true, SampleRate: 1, QuarantineObjects: 1},
		OnError: func(err error) { reports = append(reports, err) }})
	must(t, err)
	defer a.Close()
	if !a.GuardProtects() {
		t.Skip("the Go-heap backend neither protects nor decommits (-race)")
	}
	impl.RefuseDecommit(a)
	c, _ := a.NewCache()
	defer c.Close()
	b := allocN(t, c, 64)
	for i := range b {
		b[i] = 0x5a
	}
	must(t, c.Free(b))                // quarantined, still holding 0x5a
	must(t, c.Free(allocN(t, c, 64))) // the quarantine's bound releases b's
	var held [][]byte
	for range 2 * sbs { // every superblock handed out again, b's among them
		x, err := c.Alloc(64)
		if err != nil {
			break
		}
		held = append(held, x)
	}
	if len(held) < sbs-1 {
		t.Fatalf("only %d objects before running out of %d superblocks", len(held), sbs)
	}
	for _, r := range reports {
		t.Errorf("report on memory nobody wrote after its free: %v", r)
	}
	if s := a.Stats(); s.WriteAfterFrees != 0 {
		t.Errorf("Stats.WriteAfterFrees = %d, want 0", s.WriteAfterFrees)
	}
	for _, x := range held {
		must(t, c.Free(x))
	}
}
