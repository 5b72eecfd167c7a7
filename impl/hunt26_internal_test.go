package impl

import (
	"reflect"
	"strings"
	"testing"
)

// TestSiteFormatsWholeStack (DEBUG-POISON): a recorded stack that fills
// all siteDepth entries is formatted whole, its last frame too: format
// stops at the first empty entry, not one before the end.
func TestSiteFormatsWholeStack(t *testing.T) {
	var s sites
	var pcs [siteDepth]uintptr
	for i := range pcs {
		pcs[i] = reflect.ValueOf(strings.ToUpper).Pointer() + 1 // a return address inside it
	}
	s.stacks = append(s.stacks, pcs)
	if got := strings.Count(s.format(1), "strings.ToUpper\n"); got != siteDepth {
		t.Fatalf("a full stack of %d frames formats %d of them:\n%s", siteDepth, got, s.format(1))
	}
}
