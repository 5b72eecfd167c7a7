// Command mutants proves the tests can fail: it builds and runs the test suite
// once for each injected bug (build tag refalloc_mutant_<name>, see
// impl/internal/mutant) and requires every run to fail. It prints a table:
// mutant, killed or survived, which test killed it, time to kill. A surviving
// mutant makes it exit with status 1.
//
//	go run ./cmd/mutants              # every mutant
//	go run ./cmd/mutants -only nozero # one
package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"time"
)

// mutants are the injected bugs, in the order they are run.
var mutants = []string{
	"capacitycredit", "noflushdebit", "counterwrap", "stalesbcache", "staleowner",
	"lostremote", "remoteintolocal", "nodoublefreecheck", "nozero",
}

// packages run in this order; a mutant is killed at the first failing test.
var packages = []string{"./impl", "./invariants", "./fuzz"}

type result struct {
	mutant, pkg, test string
	killed            bool
	took              time.Duration
	err               string
}

func main() {
	only := flag.String("only", "", "run only this mutant")
	timeout := flag.Duration("timeout", 10*time.Minute, "per package and mutant")
	race := flag.Bool("race", false, "run the tests with -race too")
	flag.Parse()
	var results []result
	for _, m := range mutants {
		if *only != "" && m != *only {
			continue
		}
		r := run(m, *timeout, *race)
		results = append(results, r)
		fmt.Fprintf(os.Stderr, "mutants: %-18s %s\n", m, verdict(r))
	}
	fmt.Println("| mutant | verdict | killed by | time to kill |")
	fmt.Println("|---|---|---|---|")
	survived := 0
	for _, r := range results {
		by := "-"
		if r.killed {
			by = r.pkg + " " + r.test
		} else {
			survived++
		}
		fmt.Printf("| %s | %s | %s | %v |\n", r.mutant, verdict(r), by, r.took.Round(10*time.Millisecond))
	}
	if survived > 0 {
		fmt.Printf("\n%d mutant(s) survived: the tests cannot see that bug.\n", survived)
		os.Exit(1)
	}
}

func verdict(r result) string {
	switch {
	case r.err != "":
		return "error: " + r.err
	case r.killed:
		return "killed"
	}
	return "SURVIVED"
}

// run runs the packages under the mutant's tag until a test fails.
func run(m string, timeout time.Duration, race bool) result {
	r := result{mutant: m}
	start := time.Now()
	for _, pkg := range packages {
		args := []string{"test", "-count=1", "-json", "-failfast", "-tags", "refalloc_mutant_" + m, "-timeout", timeout.String()}
		if race {
			args = append(args, "-race")
		}
		out, _ := exec.Command("go", append(args, pkg)...).Output()
		test, built := firstFailure(out)
		if !built {
			r.err = "the mutant does not build"
			return r
		}
		if test != "" {
			r.killed, r.pkg, r.test, r.took = true, pkg, test, time.Since(start)
			return r
		}
	}
	r.took = time.Since(start)
	return r
}

// firstFailure reads go test -json output: the first failed test (the package,
// "(package)", when it failed outside a test), and whether anything ran.
func firstFailure(out []byte) (test string, built bool) {
	sc := bufio.NewScanner(bytes.NewReader(out))
	sc.Buffer(make([]byte, 1<<20), 1<<24)
	for sc.Scan() {
		var ev struct{ Action, Test, Output string }
		if json.Unmarshal(sc.Bytes(), &ev) != nil {
			continue
		}
		switch {
		case ev.Action == "run" || ev.Action == "pass" || ev.Action == "skip":
			built = true
		case ev.Action == "fail" && ev.Test != "":
			return strings.SplitN(ev.Test, "/", 2)[0], true
		case ev.Action == "fail":
			built = built || !strings.Contains(ev.Output, "build failed")
			return "(package)", built
		}
	}
	return "", built
}
