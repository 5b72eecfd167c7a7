// The watchdog: a hang in a driver is a failure within a minute, with every
// goroutine's stack.

package invariants

import (
	"fmt"
	"os"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/refalloc/refalloc/internal/hang"
)

// HangLimit is how long the drivers (Harness, Shared, Explore, and so the
// machines, the fuzzers and the soak) may go without completing an operation
// before the watchdog fails the run. The environment variable REFALLOC_HANG
// (a time.Duration) changes it, for the watchdog's own test.
var HangLimit = 60 * time.Second

var watch struct {
	once  sync.Once
	armed atomic.Int32  // drivers open
	ops   atomic.Uint64 // operations completed
}

// arm watches the drivers from now until the returned function is called. A
// deadlocked test cannot fail from its own goroutine, which is the one stuck,
// nor wait for go test's -timeout (10 minutes by default): while any driver is
// open and no operation completes for HangLimit, the watchdog prints every
// goroutine's stack and exits the process with status 2.
func arm() (disarm func()) {
	watch.once.Do(func() {
		if d, err := time.ParseDuration(os.Getenv("REFALLOC_HANG")); err == nil && d > 0 {
			HangLimit = d
		}
		go watchdog(HangLimit)
	})
	watch.armed.Add(1)
	var once sync.Once
	return func() { once.Do(func() { watch.armed.Add(-1) }) }
}

// progress records an operation completed.
func progress() { watch.ops.Add(1) }

func watchdog(limit time.Duration) {
	tick := min(time.Second, limit/4)
	last, idle := watch.ops.Load(), time.Duration(0)
	for range time.Tick(tick) {
		ops := watch.ops.Load()
		if ops != last || watch.armed.Load() == 0 {
			last, idle = ops, 0
			continue
		}
		if idle += tick; idle < limit {
			continue
		}
		buf := hang.Stacks()
		// The FAIL line names the test the driver serves (the goroutine
		// running it is inside this package's code), as the testing
		// package would: go test and cmd/mutants read it.
		var tests []string
		for _, t := range hang.Running(buf, nil) {
			tests = append(tests, t)
		}
		sort.Strings(tests)
		hang.Fail(os.Stdout, tests, limit)
		fmt.Fprintf(os.Stderr, "invariants: no operation completed for %v (a hang: deadlock or livelock); every goroutine:\n\n%s\n", limit, buf)
		os.Exit(2)
	}
}
