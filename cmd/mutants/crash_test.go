package main

import "testing"

// TestCrashedIn: a fatal error names the test on the crashing goroutine's
// stack (the first printed after "fatal error:"), whether the test runs it or
// started it, and nothing when that goroutine belongs to no test of this
// module (the testing package's fuzz frames, TestMain's watchdog); a test on
// another goroutine's stack, printed later, is never named. The crash may be
// the output's first line (the cases that want "" start so: they must not
// pass merely because crashedIn finds no crash).
func TestCrashedIn(t *testing.T) {
	const tail = `

goroutine 1 gp=0x1 m=nil [chan receive]:
testing.(*T).Run(0x1, {0x2, 0x3}, 0x4)
	/usr/local/go/src/testing/testing.go:2109 +0x4e5
github.com/refalloc/refalloc/impl.TestOther(0x1)
	/work/main/impl/other_test.go:9 +0x3f8
`
	for _, c := range []struct{ out, want string }{
		{`=== RUN   TestFrontFreeAdoptsOrphan
panic: refalloc: internal error
fatal error: panic holding locks

goroutine 22 gp=0x1 m=0 mp=0x2 [running]:
runtime.throw({0x91cd82?, 0x9566d0?})
	/usr/local/go/src/runtime/panic.go:1229 +0x48
github.com/refalloc/refalloc/impl.(*Allocator).notify(0x1, 0x2)
	/work/main/impl/remote.go:128 +0x16b
github.com/refalloc/refalloc/impl.TestFrontFreeAdoptsOrphan(0x169769e5e488)
	/work/main/impl/front_pinned_test.go:262 +0x3f8
testing.tRunner(0x1, 0x2)
	/usr/local/go/src/testing/testing.go:2036 +0xea` + tail, "TestFrontFreeAdoptsOrphan"},
		{`runtime: goroutine stack exceeds 1000000000-byte limit
fatal error: stack overflow

goroutine 7 gp=0x1 m=0 mp=0x2 [running]:
github.com/refalloc/refalloc/impl.(*Cache).freeMiss(0x1)
	/work/main/impl/cache.go:10 +0x1
created by github.com/refalloc/refalloc/impl.TestRemoteBadFreeNamesAddress.func2 in goroutine 6
	/work/main/impl/x_test.go:5 +0x1` + tail, "TestRemoteBadFreeNamesAddress"},
		{`fatal error: all goroutines are asleep - deadlock!

goroutine 3 gp=0x1 m=0 mp=0x2 [running]:
github.com/refalloc/refalloc/impl.init.0()
	/work/main/impl/x.go:5 +0x1` + tail, ""},
		{`fatal error: stack overflow

goroutine 9 gp=0x1 m=0 mp=0x2 [running]:
github.com/refalloc/refalloc/invariants.RunMachine(0x1)
	/work/main/invariants/machine.go:10 +0x1
testing.(*F).Fuzz.func1.1(0x1)
	/usr/local/go/src/testing/fuzz.go:341 +0x1
created by testing.(*F).Fuzz.func1 in goroutine 8
	/usr/local/go/src/testing/fuzz.go:330 +0x1` + tail, ""},
		{`fatal error: concurrent map writes

goroutine 5 gp=0x1 m=0 mp=0x2 [running]:
github.com/refalloc/refalloc/impl_test.watchTests(0x1, 0x2)
	/work/main/impl/watchdog_test.go:40 +0x1
created by github.com/refalloc/refalloc/impl_test.TestMain in goroutine 1
	/work/main/impl/watchdog_test.go:33 +0x1` + tail, ""},
		{`fatal error: stack overflow

goroutine 7 gp=0x1 m=0 mp=0x2 [running]:
github.com/refalloc/refalloc/impl.TestFirstLine(0x1)
	/work/main/impl/x_test.go:5 +0x1` + tail, "TestFirstLine"}, // the crash is the output's first line
		{"--- FAIL: TestX (0.00s)\nFAIL\n", ""},
	} {
		if got := crashedIn([]byte(c.out)); got != c.want {
			t.Errorf("crashedIn(%.40q...) = %q, want %q", c.out, got, c.want)
		}
	}
}
