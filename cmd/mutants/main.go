// Command mutants proves the tests can fail: it builds each test package once
// with every injected bug compiled in (build tag refalloc_mutants, see
// internal/mutant; refalloc_yield too, so the interleaving explorer's tests
// run), then, for each mutant, runs the packages with that bug switched on,
// the package whose code holds the bug first, until a test fails. A kill
// counts only if it is deterministic: the killing test is run again on its
// own, twice, and must fail both times; a kill by a test timeout is not a
// kill. A failure that does not repeat is no kill, but does not end its
// package's run either: the package runs again without that test. It prints
// a table (mutant, rule, method, verdict, killing test, time) and exits 1 if
// a mutant survived, or if the suite fails with no mutant on.
//
//	go run ./cmd/mutants              # every mutant
//	go run ./cmd/mutants -only nozero # one (or a list: -only nozero,genwrap)
//	go run ./cmd/mutants -tags ''     # the README's build only: which bugs
//	                                  # only the race-window tests see
//	go run ./cmd/mutants -write-killers # and record each mutant's killer
//	go run ./cmd/mutants -j 1         # one mutant at a time (default: one per CPU)
//
// cmd/mutants/killers.txt names the test that killed each mutant last time
// (mutant, package, test). That test is tried first, on its own: a mutant
// that only a late test of a slow package kills (the soak) then costs three
// runs of that test, not the packages before it. It is only a hint: the kill
// still needs three failures of one test, and a hint that passes (stale, or
// another build) falls back to running the packages in order.
package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/refalloc/refalloc/internal/mutant"
)

// packages run in this order, but for each mutant the package whose code
// holds its switch first (home): a mutant is killed at the first failing test.
// internal/yieldbuild runs last, as in the README's command: the check
// build's tests (impl/check_on.go's assertions, which no other build
// compiles), and without refalloc_yield the yield build's tests too.
// cmd/refcheck is the soak's command line: a mutant there (a flag that no
// longer reaches SoakConfig) is killed only by its own tests (adv18).
var packages = []string{"./spec", "./oracle", "./impl", "./impl/expvarstats", "./invariants", "./fuzz", "./cmd/refcheck"}

type result struct {
	m       mutant.Mutant
	verdict string
	pkg     string
	test    string
	took    time.Duration
}

func main() {
	only := flag.String("only", "", "run only these mutants (names separated by commas)")
	timeout := flag.Duration("timeout", 3*time.Minute, "per package and mutant")
	extra := flag.String("tags", "refalloc_yield", "build tags besides refalloc_mutants")
	jobs := flag.Int("j", runtime.NumCPU(), "mutants run at once")
	write := flag.Bool("write-killers", false, "rewrite "+killersFile+" with the killers found")
	flag.Parse()
	hints, err := readKillers()
	if err != nil {
		fatal(err)
	}
	tags := strings.TrimSpace("refalloc_mutants " + *extra)
	packages = append(packages, "./internal/yieldbuild")
	dir, err := os.MkdirTemp("", "mutants")
	if err != nil {
		fatal(err)
	}
	defer os.RemoveAll(dir)
	bins := map[string]string{}
	for _, pkg := range packages {
		bin := filepath.Join(dir, strings.ReplaceAll(strings.Trim(pkg, "./"), "/", "_")+".test")
		if out, err := exec.Command("go", "test", "-c", "-tags", tags, "-o", bin, pkg).CombinedOutput(); err != nil {
			fatal(fmt.Errorf("building %s: %v\n%s", pkg, err, out))
		}
		// go test -c writes nothing for a package with no tests in this
		// build (internal/yieldbuild under refalloc_portable): it has none to run.
		if _, err := os.Stat(bin); err == nil {
			bins[pkg] = bin
		}
	}
	packages = slices.DeleteFunc(packages, func(pkg string) bool { return bins[pkg] == "" })
	if err := baseline(bins, *timeout); err != nil {
		fatal(err)
	}
	homes, err := homes()
	if err != nil {
		fatal(err)
	}
	chosen := choose(*only)
	// -j mutants at a time: each run is one test binary, mostly on one
	// goroutine, so on 2 cores two at once take about half the time (CI's
	// budget). A kill still needs three failures of one test, and a mutant's
	// runs are its own: the workers share only the results, by index.
	results := make([]result, len(chosen))
	next := make(chan int)
	var wg sync.WaitGroup
	var mu sync.Mutex // the progress lines
	for range max(1, *jobs) {
		wg.Go(func() {
			for i := range next {
				m := chosen[i]
				r := kill(m, bins, hints[m.Name], order(homes[m.Name]), *timeout)
				results[i] = r
				mu.Lock()
				fmt.Fprintf(os.Stderr, "mutants: %-18s %s %s %s\n", m.Name, r.verdict, r.pkg, r.test)
				mu.Unlock()
			}
		})
	}
	for i := range chosen {
		next <- i
	}
	close(next)
	wg.Wait()
	record(hints, results)
	status := summary(os.Stdout, results)
	if *write {
		if err := writeKillers(hints); err != nil {
			fatal(err)
		}
	}
	if status != 0 {
		os.Exit(status)
	}
}

// record makes each killed mutant's killer its hint; a mutant not killed
// keeps the hint it had: a flaky test or a timeout is no killer.
func record(hints map[string][2]string, results []result) {
	for _, r := range results {
		if r.verdict == "killed" {
			hints[r.m.Name] = [2]string{r.pkg, r.test}
		}
	}
}

// summary prints the table of the results and returns the exit status: 1 if
// a mutant was not killed, else 0.
func summary(w io.Writer, results []result) int {
	fmt.Fprintln(w, "| mutant | rule | method | bug | verdict | killed by | time to kill |")
	fmt.Fprintln(w, "|---|---|---|---|---|---|---|")
	survived := 0
	for _, r := range results {
		by := "-"
		if r.verdict == "killed" {
			by = r.pkg + " " + r.test
		} else {
			survived++
		}
		fmt.Fprintf(w, "| %s | %s | %s | %s | %s | %s | %v |\n", r.m.Name, r.m.Rule, r.m.Method, r.m.Bug, r.verdict, by, r.took.Round(10*time.Millisecond))
	}
	fmt.Fprintf(w, "\n%d of %d mutants killed.\n", len(results)-survived, len(results))
	if survived > 0 {
		fmt.Fprintf(w, "%d mutant(s) not killed deterministically: the tests cannot see that bug.\n", survived)
		return 1
	}
	return 0
}

// baseline runs the packages with no mutant on: the suite must pass, else
// every "kill" is noise. A package that fails in any way (a test, a crash
// outside the tests, a timeout) is an error.
func baseline(bins map[string]string, timeout time.Duration) error {
	for _, pkg := range packages {
		if failed, test, _, out := run(bins[pkg], pkg, "", "", "", timeout); failed {
			// The output's tail, so that a flaky test shows why in CI's log.
			return fmt.Errorf("with no mutant on, %s fails (%s):\n%s", pkg, test, tail(out, 60))
		}
	}
	return nil
}

// choose is the mutants -only names (names separated by commas), in All's
// order; every mutant when only is "".
func choose(only string) []mutant.Mutant {
	var chosen []mutant.Mutant
	for _, m := range mutant.All {
		if only == "" || slices.Contains(strings.Split(only, ","), m.Name) {
			chosen = append(chosen, m)
		}
	}
	return chosen
}

// kill runs the packages with m on, in order, until a test fails and then
// fails twice more on its own; a failure that does not repeat moves on to the
// next package.
func kill(m mutant.Mutant, bins map[string]string, hint [2]string, order []string, timeout time.Duration) (r result) {
	r = result{m: m, verdict: "SURVIVED"}
	start := time.Now()
	defer func() { r.took = time.Since(start) }()
	if pkg, test := hint[0], hint[1]; bins[pkg] != "" && test != "" {
		if failed, got, timedOut, _ := run(bins[pkg], pkg, m.Name, anyOf(test), "", timeout); failed && !timedOut && got == test &&
			repeats(bins[pkg], pkg, m.Name, test, timeout) {
			r.verdict, r.pkg, r.test = "killed", pkg, test
			return r
		}
	}
	for _, pkg := range order {
		// -failfast stops a package at its first failing test: when that
		// one is flaky, the package runs again without it (and without
		// every one flaky before), so a later test of the same package may
		// still kill the mutant for good, then the later packages; so may
		// they after a package that failed outside a test.
		var flaky []string
		for {
			failed, test, timedOut, _ := run(bins[pkg], pkg, m.Name, "", anyOf(flaky...), timeout)
			if timedOut {
				r.verdict, r.pkg, r.test = "SURVIVED (only a timeout)", pkg, test
				return r
			}
			if !failed {
				break
			}
			if slices.Contains(flaky, test) {
				return r // skipped, yet named again (a crash on its goroutine): flaky still
			}
			r.pkg, r.test = pkg, test
			if test == "" {
				// No test to run again, so no kill; a later package may
				// still make one.
				r.verdict = "SURVIVED (the package failed outside a test)"
				break
			}
			if repeats(bins[pkg], pkg, m.Name, test, timeout) {
				r.verdict = "killed"
				return r
			}
			r.verdict = "SURVIVED (flaky: the killing test passed when run again)"
			flaky = append(flaky, test)
		}
	}
	return r
}

// anyOf is the -test.run or -test.skip pattern that matches exactly the
// top-level tests named: "" for none.
func anyOf(tests ...string) string {
	if len(tests) == 0 {
		return ""
	}
	q := make([]string, len(tests))
	for i, t := range tests {
		q[i] = regexp.QuoteMeta(t)
	}
	return "^(" + strings.Join(q, "|") + ")$"
}

// repeats reports whether test fails twice more on its own with m on.
func repeats(bin, pkg, name, test string, timeout time.Duration) bool {
	for range 2 {
		if again, _, to, _ := run(bin, pkg, name, anyOf(test), "", timeout); !again || to {
			return false
		}
	}
	return true
}

// order is packages with home, if it is one of them, moved to the front: a
// slip in the oracle or in invariants' checks is seen by its own package's
// tests in a second, after impl's whole suite otherwise.
func order(home string) []string {
	o := []string{}
	if slices.Contains(packages, home) {
		o = append(o, home)
	}
	for _, pkg := range packages {
		if pkg != home {
			o = append(o, pkg)
		}
	}
	return o
}

var (
	onLine    = regexp.MustCompile(`(?m)^\s*(\w+)\s*=\s*on\("([^"]+)"\)`)
	switchUse = regexp.MustCompile(`\bmutant\.(\w+)\b`)
)

// homes maps each mutant's name to the package (of packages) whose non-test
// code uses its switch (internal/mutant/on.go says which switch a name turns
// on); a switch used in several packages is homed in the first of them.
func homes() (map[string]string, error) {
	on, err := os.ReadFile(filepath.Join("internal", "mutant", "on.go"))
	if err != nil {
		return nil, err
	}
	byIdent := map[string]string{}
	for _, m := range onLine.FindAllSubmatch(on, -1) {
		byIdent[string(m[1])] = string(m[2])
	}
	h := map[string]string{}
	for _, pkg := range packages {
		files, err := filepath.Glob(filepath.Join(pkg, "*.go"))
		if err != nil {
			return nil, err
		}
		for _, f := range files {
			if strings.HasSuffix(f, "_test.go") {
				continue
			}
			src, err := os.ReadFile(f)
			if err != nil {
				return nil, err
			}
			for _, m := range switchUse.FindAllSubmatch(src, -1) {
				if name, ok := byIdent[string(m[1])]; ok && h[name] == "" {
					h[name] = pkg
				}
			}
		}
	}
	return h, nil
}

// killersFile is the hints: a line "mutant package test" for each mutant.
const killersFile = "cmd/mutants/killers.txt"

func readKillers() (map[string][2]string, error) {
	h := map[string][2]string{}
	data, err := os.ReadFile(killersFile)
	if errors.Is(err, os.ErrNotExist) {
		return h, nil
	}
	if err != nil {
		return nil, err
	}
	for i, line := range strings.Split(string(data), "\n") {
		f := strings.Fields(line)
		if len(f) == 0 || strings.HasPrefix(f[0], "#") {
			continue
		}
		if len(f) != 3 {
			return nil, fmt.Errorf("%s:%d: want \"mutant package test\", got %q", killersFile, i+1, line)
		}
		h[f[0]] = [2]string{f[1], f[2]}
	}
	return h, nil
}

func writeKillers(h map[string][2]string) error {
	var b strings.Builder
	b.WriteString("# The test that last killed each mutant, tried first by cmd/mutants\n# (a hint: regenerate with go run ./cmd/mutants -write-killers).\n")
	for _, m := range mutant.All {
		if k, ok := h[m.Name]; ok {
			fmt.Fprintf(&b, "%s %s %s\n", m.Name, k[0], k[1])
		}
	}
	return os.WriteFile(killersFile, []byte(b.String()), 0o644)
}

var failLine = regexp.MustCompile(`(?m)^--- FAIL: (\S+)`)

// run runs a test binary in its package's directory with the mutant name on
// (none if ""), only the tests only matches (all if "") but those skip
// matches (none if ""), and reports whether it failed, the first top-level
// test that failed, whether it ran out of time, and what it printed.
func run(bin, pkg, name, only, skip string, timeout time.Duration) (failed bool, test string, timedOut bool, output []byte) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout+30*time.Second)
	defer cancel()
	args := []string{"-test.short", "-test.failfast", "-test.v", "-test.timeout", timeout.String()}
	if only != "" {
		args = append(args, "-test.run", only)
	}
	if skip != "" {
		args = append(args, "-test.skip", skip)
	}
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Dir = pkg
	cmd.Env = append(os.Environ(), mutant.Env+"="+name)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	if err == nil {
		return false, "", false, out.Bytes()
	}
	var ee *exec.ExitError
	if !errors.As(err, &ee) {
		fatal(fmt.Errorf("running %s: %v", bin, err))
	}
	timedOut = ctx.Err() != nil || bytes.Contains(out.Bytes(), []byte("panic: test timed out"))
	if m := failLine.FindSubmatch(out.Bytes()); m != nil {
		test = strings.SplitN(string(m[1]), "/", 2)[0]
	} else {
		test = crashedIn(out.Bytes())
	}
	return true, test, timedOut, out.Bytes()
}

// crashFrame finds, in a goroutine's stack, a function of this module named
// as a test (Go's rule: Test or Fuzz, then no lower-case letter) that the
// goroutine runs or was started by. The testing package's own frames
// (testing.(*F).Fuzz.func1) are not this module's.
var crashFrame = regexp.MustCompile(`(?m)^(?:created by )?github\.com/refalloc/refalloc/\S*?\.((?:Test|Fuzz)(?:[A-Z0-9_]\w*)?)(?:\.func[0-9.]+)?(?:\(| in goroutine)`)

// crashedIn names the test whose goroutine brought the binary down with a
// fatal error (a throw prints no FAIL line: a panic while pinned, a stack
// overflow): the runtime prints the crashing goroutine's stack first. "" if
// the crash was not in a test's goroutine.
func crashedIn(out []byte) string {
	out = append([]byte("\n"), out...) // the crash may be the output's first line
	i := bytes.Index(out, []byte("\nfatal error: "))
	if i < 0 {
		return ""
	}
	rest := out[i:]
	j := bytes.Index(rest, []byte("\ngoroutine "))
	if j < 0 {
		return ""
	}
	block := rest[j+1:]
	if k := bytes.Index(block, []byte("\n\n")); k >= 0 {
		block = block[:k]
	}
	for _, m := range crashFrame.FindAllSubmatch(block, -1) {
		if name := string(m[1]); name != "TestMain" { // TestMain starts the watchdogs, it is no test
			return name
		}
	}
	return ""
}

// tail is the last n lines of out.
func tail(out []byte, n int) string {
	lines := strings.Split(strings.TrimRight(string(out), "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}

func fatal(err error) {
	fmt.Fprintln(os.Stderr, "mutants:", err)
	os.Exit(2)
}
