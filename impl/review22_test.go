package impl_test

// Tests of review22, a review of resource lifetime: what New takes and what
// Close gives back, the decay timer, calls after Close. Each names its rule.

import (
	"errors"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/refalloc/refalloc/impl"
	"github.com/refalloc/refalloc/spec"
)

// inChild runs the test named name in a child process with REFALLOC_REVIEW22
// set to mode, and reports whether this process is that child. The parent
// fails t if the child fails or dies: what these tests guard against kills
// the process (the Go runtime's fatal "out of memory"), which no recover
// stops.
func inChild(t *testing.T, name, mode string) bool {
	t.Helper()
	if os.Getenv("REFALLOC_REVIEW22") == mode {
		return true
	}
	cmd := exec.Command(os.Args[0], "-test.run=^"+name+"$", "-test.v")
	cmd.Env = append(os.Environ(), "REFALLOC_REVIEW22="+mode)
	if out, err := cmd.CombinedOutput(); err != nil {
		if lines := strings.SplitAfterN(string(out), "\n", 12); len(lines) == 12 {
			out = []byte(strings.Join(lines[:11], "") + "...\n") // the fatal error and the top of its stack
		}
		t.Fatalf("%s in a child process: %v\n%s", name, err, out)
	}
	return false
}

// TestHeapBackendDefaultReserve (MEM-ACCOUNT; Options.Reserve: "0 means 64
// GiB (1 GiB in -race builds, where the payload is a Go-heap arena)"): the
// 1 GiB default is there because the Go-heap backend's reservation is a
// Go-heap slice, which the Go runtime maps without MAP_NORESERVE, so the
// kernel charges all of it at once. Options.HeapBackend selects that backend
// outside -race builds too, and the zero Options is valid; but the default
// followed the build tag, not the backend: New(Options{HeapBackend: true})
// made a 64 GiB Go-heap slice, and on a machine with less than that of
// memory and swap (this one: 23 GiB, no swap, overcommit heuristic) the
// kernel refuses the runtime's mapping and the process dies with "fatal
// error: out of memory", in New. In a child process, so that the failure is
// a failure and not the end of the test binary.
func TestHeapBackendDefaultReserve(t *testing.T) {
	if !inChild(t, "TestHeapBackendDefaultReserve", "defaultreserve") {
		return
	}
	a, err := impl.New(impl.Options{HeapBackend: true})
	must(t, err)
	defer a.Close()
	if got := a.Stats().Reserved; got != 1<<30 {
		t.Fatalf("New(Options{HeapBackend: true}) reserved a %d-byte Go-heap arena, want 1 GiB, the Go-heap backend's default", got)
	}
}

// TestHeapBackendHugeReserveIsAnError (MEM-ACCOUNT, OOM-REAL: New's reservation
// that cannot be had is ErrOutOfMemory): under the Go-heap backend (every
// -race build, Options.HeapBackend) a Reserve the kernel will not commit
// (here 1 TiB, spec.MaxAlloc, which the mmap backend reserves with
// MAP_NORESERVE without trouble) killed the process in New with the
// runtime's fatal "out of memory" instead of returning an error: a program
// whose production Reserve is large could not be tested under -race at all.
// New must return (an error, or an Allocator where the kernel overcommits),
// never kill the process.
func TestHeapBackendHugeReserveIsAnError(t *testing.T) {
	if !inChild(t, "TestHeapBackendHugeReserveIsAnError", "hugereserve") {
		return
	}
	a, err := impl.New(impl.Options{HeapBackend: true, Reserve: spec.MaxAlloc})
	if err != nil {
		if !errors.Is(err, impl.ErrOutOfMemory) {
			t.Fatalf("New of a %d-byte Go-heap arena: %v, want ErrOutOfMemory", spec.MaxAlloc, err)
		}
		return
	}
	must(t, a.Close())
}
