package invariants_test

import (
	"strings"
	"testing"

	"github.com/refalloc/refalloc/impl"
	"github.com/refalloc/refalloc/invariants"
)

// TestSharedViolationExplainsGuardedFree (REFINES, GUARD-FAULT): when the
// harness finds that an object it holds was freed under it, the violation
// carries the allocator's record of the guarded object (who allocated and who
// freed it), so a concurrent soak failure that does not replay says which call
// freed it. Here the object is freed behind the harness's back, and a second
// one's free releases it from the quarantine (so its memory can be read).
func TestSharedViolationExplainsGuardedFree(t *testing.T) {
	sh, err := invariants.NewShared(impl.Options{Reserve: 64 << 16, Guard: impl.GuardOptions{Enabled: true, SampleRate: 1, QuarantineObjects: 1}})
	must(t, err)
	defer sh.Close()
	c, id, err := sh.OpenCache()
	must(t, err)
	o, ok := sh.Alloc(c, id, 100, 1, 5)
	if !ok {
		t.Fatal("Alloc failed")
	}
	p, err := sh.A.Alloc(100)
	must(t, err)
	must(t, sh.A.Free(o.B)) // not through the harness
	must(t, sh.A.Free(p))   // o leaves the quarantine
	sh.Free(c, id, o)
	found := false
	for _, v := range sh.Violations() {
		found = found || strings.Contains(v.Detail, "Free of live object") && strings.Contains(v.Detail, "freed at:") &&
			strings.Contains(v.Detail, "TestSharedViolationExplainsGuardedFree")
	}
	if !found {
		t.Fatalf("want a REFINES violation naming the free behind the harness's back, got %v", sh.Violations())
	}
	sh.CloseCache(c, id)
}
