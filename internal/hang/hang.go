// Package hang reads a goroutine dump for the tests that are running, so that
// a watchdog that ends a hung test binary (impl's tests, invariants' drivers)
// can name the test the way the testing package names a failure: a
// "--- FAIL: TestX" line, which go test's reader and cmd/mutants look for.
package hang

import (
	"bytes"
	"fmt"
	"io"
	"regexp"
	"runtime"
	"strings"
	"time"
)

// Stacks is every goroutine's stack (runtime.Stack, all), whole.
func Stacks() []byte {
	buf := make([]byte, 1<<20)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) {
			return buf[:n]
		}
		buf = make([]byte, 2*len(buf))
	}
}

// testFrame is the function testing.tRunner called: a test, or a subtest's
// closure (TestX.func1) or function; the group is the top-level test's name.
var testFrame = regexp.MustCompile(`(?m)^[^\s(]*\.(Test[A-Za-z0-9_]*)[^\s(]*\(.*\n\t.*\n(?:testing\.tRunner)`)

// Running maps each goroutine of stacks ("goroutine N") that runs a test's own
// code, not waiting in t.Run for its subtests, to the top-level test's name.
// skip, if not nil, leaves out the goroutines (their stack) it reports true for.
func Running(stacks []byte, skip func(g []byte) bool) map[string]string {
	running := map[string]string{}
	for _, g := range bytes.Split(stacks, []byte("\n\n")) {
		if !bytes.Contains(g, []byte("\ntesting.tRunner(")) || bytes.Contains(g, []byte("\ntesting.(*T).Run(")) ||
			skip != nil && skip(g) {
			continue
		}
		if m := testFrame.FindSubmatch(g); m != nil {
			header, _, _ := strings.Cut(string(g), " [")
			running[header] = string(m[1])
		}
	}
	return running
}

// Fail writes the FAIL line of each test in tests (names, repeats allowed) to
// w, the testing package's way, saying it hung for d.
func Fail(w io.Writer, tests []string, d time.Duration) {
	seen := map[string]bool{}
	for _, t := range tests {
		if !seen[t] {
			seen[t] = true
			fmt.Fprintf(w, "--- FAIL: %s (hung for %v)\n", t, d.Round(time.Second))
		}
	}
}
