package hang

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// dump is a goroutine dump as runtime.Stack writes it: a parent waiting in
// t.Run, its subtest (a closure) stuck in a refill, a test of an internal
// package running on its own, a goroutine a test started, and the watchdog.
const dump = `goroutine 7 [chan receive]:
testing.(*T).Run(0xc000102000, {0x5f2a1b, 0x5}, 0x60c7a8)
	/usr/local/go/src/testing/testing.go:2005 +0x485
github.com/refalloc/refalloc/impl_test.TestSparseServesAtOOM(0xc000102000)
	/work/main/impl/partial_test.go:110 +0x45
testing.tRunner(0xc000102000, 0x60c7b0)
	/usr/local/go/src/testing/testing.go:1934 +0xea
created by testing.(*T).Run in goroutine 1
	/usr/local/go/src/testing/testing.go:1997 +0x465

goroutine 8 [runnable]:
github.com/refalloc/refalloc/impl.(*Cache).refill(0xc000180000, 0x24)
	/work/main/impl/cache.go:640 +0x1c5
github.com/refalloc/refalloc/impl_test.TestSparseServesAtOOM.func1(0xc000102200)
	/work/main/impl/partial_test.go:114 +0x2b
testing.tRunner(0xc000102200, 0x60c7c0)
	/usr/local/go/src/testing/testing.go:1934 +0xea
created by testing.(*T).Run in goroutine 7
	/usr/local/go/src/testing/testing.go:1997 +0x465

goroutine 9 [select]:
github.com/refalloc/refalloc/impl.TestNotifyOrder(0xc000102400)
	/work/main/impl/remote_internal_test.go:30 +0x65
testing.tRunner(0xc000102400, 0x60c7d0)
	/usr/local/go/src/testing/testing.go:1934 +0xea
created by testing.(*T).Run in goroutine 1
	/usr/local/go/src/testing/testing.go:1997 +0x465

goroutine 10 [semacquire]:
sync.(*Mutex).Lock(0xc0000a0010)
	/usr/local/go/src/sync/mutex.go:90 +0x65
github.com/refalloc/refalloc/impl_test.TestSparseServesAtOOM.func1.1()
	/work/main/impl/partial_test.go:120 +0x25
created by github.com/refalloc/refalloc/impl_test.TestSparseServesAtOOM.func1 in goroutine 8
	/work/main/impl/partial_test.go:118 +0x89

goroutine 11 [sleep]:
time.Sleep(0x3b9aca00)
	/usr/local/go/src/runtime/time.go:300 +0x10d
main.watch()
	/work/main/impl/watchdog_test.go:40 +0x2a
`

// TestRunning: the goroutines running a test's own code, by top-level name;
// not the parent waiting for its subtest, not a goroutine a test started, not
// one skip leaves out.
func TestRunning(t *testing.T) {
	got := Running([]byte(dump), nil)
	want := map[string]string{"goroutine 8": "TestSparseServesAtOOM", "goroutine 9": "TestNotifyOrder"}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("Running (-want +got):\n%s", d)
	}
	got = Running([]byte(dump), func(g []byte) bool { return bytes.Contains(g, []byte("impl.(*Cache).refill(")) })
	want = map[string]string{"goroutine 9": "TestNotifyOrder"}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("Running with a skip (-want +got):\n%s", d)
	}
}

// TestFail: one FAIL line a test, the testing package's way.
func TestFail(t *testing.T) {
	var b strings.Builder
	Fail(&b, []string{"TestB", "TestA", "TestB"}, 61500*time.Millisecond)
	want := "--- FAIL: TestB (hung for 1m2s)\n--- FAIL: TestA (hung for 1m2s)\n"
	if b.String() != want {
		t.Errorf("Fail wrote %q, want %q", b.String(), want)
	}
}

// TestStacksWhole: Stacks grows its buffer until the dump holds every
// goroutine (runtime.Stack cuts it short at the buffer's end otherwise).
func TestStacksWhole(t *testing.T) {
	done := make(chan struct{})
	defer close(done)
	const n = 5000 // a dump of over 1 MiB, the first buffer
	for range n {
		go func() { <-done }()
	}
	s := Stacks()
	if got := bytes.Count(s, []byte("\n\ngoroutine ")) + 1; len(s) <= 1<<20 || got < n+1 {
		t.Errorf("Stacks: %d bytes, %d goroutines; want over 1 MiB and at least %d", len(s), got, n+1)
	}
}
