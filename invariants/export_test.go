package invariants

import (
	"github.com/refalloc/refalloc/impl"
	"github.com/refalloc/refalloc/oracle"
)

// HookPoint is where Shared's hook holds a call.
type HookPoint = hookPoint

// Where Shared's hook holds a Free or Realloc in flight.
const (
	HookCall      = hookCall      // begun, before the allocator call
	HookReturn    = hookReturn    // the allocator call returned, not yet ended
	HookHandedOut = hookHandedOut // an Alloc's call returned an object, not yet ended
)

// SetHook makes h run around every Free's and Realloc's call on the allocator
// and after every Alloc's, without Shared's mutex: a test holds a call in
// flight there.
func (s *Shared) SetHook(h func(at hookPoint, x uintptr)) { s.hook = h }

// CheckMiss, CheckTrimmed and ContainsCount are the harness's own checks, for
// tests that feed them a broken snapshot or error.
var (
	CheckMiss      = checkMiss
	FreeVerdict    = freeVerdict
	RefusalVerdict = refusalVerdict
	CheckTrimmed   = checkTrimmed
	ContainsCount  = containsCount
	Flushed        = flushed
	FlushedIDs     = flushedIDs
	ExpectInPlace  = expectInPlace
	ReportNames    = reportNames
	StatsTable     = statsTable
)

// SetDebug changes whether the harness expects the allocator to be in debug
// mode, for a test that makes it expect what the allocator does not do.
func (h *Harness) SetDebug(debug bool) { h.debug = debug }

// SoakAtEnd runs Soak with atEnd run after its workers are done, before its
// final EMPTY check and its report of writes after free; SoakEdges are the
// sizes its workers draw at the edges.
func SoakAtEnd(cfg SoakConfig, atEnd func(*Shared)) (*SoakReport, error) {
	cfg.atEnd = atEnd
	return Soak(cfg)
}

// SoakStats runs Soak with stats shown each Stats its workers read while the
// others run, before the soak judges it (StatsNow).
func SoakStats(cfg SoakConfig, stats func(*impl.Stats)) (*SoakReport, error) {
	cfg.stats = stats
	return Soak(cfg)
}

var SoakEdges = soakEdges

// OOMIDs are the caches one of which must show an out-of-memory's state
// after a call on cache id (OOM-REAL).
func (h *Harness) OOMIDs(s *impl.Snapshot, id int) []int { return h.oomIDs(s, id) }

// CheckUnroutedFrontOOM is checkOOM for a call on Front through the
// Allocator's methods (served by no cache the harness chose).
func (h *Harness) CheckUnroutedFrontOOM(s *impl.Snapshot, n, align int) []*Violation {
	defer func(served int) { h.served = served }(h.served)
	h.served = -1
	return h.checkOOM(s, Front, n, align)
}

// ReallocFailed is the harness's check of a Realloc(b, n) on cache id that
// returned the error got (b live or not).
func (h *Harness) ReallocFailed(id int, b []byte, n int, got oracle.Kind, live bool) *Violation {
	return h.reallocFailed(id, b, n, got, live)
}
