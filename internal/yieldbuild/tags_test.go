// The helpers of the runners of the other builds: the yield build's
// (TestYieldBuild), the check build's (TestCheckBuild), the portable
// front's (TestPortableBuild) and the build without class counters
// (TestNoStatsBuild).
//go:build !race && !refalloc_check && !refalloc_portable

package yieldbuild

import (
	"bytes"
	"go/ast"
	"go/build/constraint"
	"go/parser"
	"go/token"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strings"
	"testing"

	"github.com/refalloc/refalloc/internal/mutant"
)

// packages hold the tests of the other builds, relative to this directory.
var packages = []string{"../../impl", "../../invariants", "../../fuzz"}

var testFunc = regexp.MustCompile(`^(Test|Fuzz)([^a-z]|$)`)

// tagOnly lists, by package, the tests and fuzz targets declared in the
// packages' files whose build constraint needs tag: false without it, true
// with it (every other tag off, as in the default build).
func tagOnly(t *testing.T, tag string) map[string][]string {
	byPkg := map[string][]string{}
	fset := token.NewFileSet()
	for _, dir := range packages {
		files, err := filepath.Glob(filepath.Join(dir, "*_test.go"))
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range files {
			af, err := parser.ParseFile(fset, f, nil, parser.ParseComments|parser.SkipObjectResolution)
			if err != nil {
				t.Fatal(err)
			}
			if !needsTag(t, af, tag) {
				continue
			}
			for _, d := range af.Decls {
				if fd, ok := d.(*ast.FuncDecl); ok && fd.Recv == nil && testFunc.MatchString(fd.Name.Name) {
					byPkg[dir] = append(byPkg[dir], fd.Name.Name)
				}
			}
		}
	}
	return byPkg
}

// allNames is the sorted, deduplicated union of tagOnly's lists.
func allNames(byPkg map[string][]string) []string {
	var names []string
	for _, n := range byPkg {
		names = append(names, n...)
	}
	slices.Sort(names)
	return slices.Compact(names)
}

// needsTag reports whether f's //go:build line is false in the default
// build and true once tag is set.
func needsTag(t *testing.T, f *ast.File, tag string) bool {
	for _, g := range f.Comments {
		if g.Pos() > f.Package {
			break
		}
		for _, c := range g.List {
			if !constraint.IsGoBuild(c.Text) {
				continue
			}
			x, err := constraint.Parse(c.Text)
			if err != nil {
				t.Fatalf("%s: %v", c.Text, err)
			}
			with := func(set bool) bool {
				return x.Eval(func(tg string) bool {
					return tg == tag && set || tg == runtime.GOOS || tg == runtime.GOARCH || tg == runtime.Compiler
				})
			}
			return !with(false) && with(true)
		}
	}
	return false
}

// runSuites runs pkgs' whole suites in the build tags, once it has seen that
// file (relative to the module's root) is compiled by tag alone: a renamed
// tag would otherwise run the default build's suites under the runner's name.
func runSuites(t *testing.T, file, tag, tags string, pkgs ...string) {
	f, err := parser.ParseFile(token.NewFileSet(), "../../"+file, nil, parser.ParseComments|parser.PackageClauseOnly)
	if err != nil {
		t.Fatal(err)
	}
	if !needsTag(t, f, tag) {
		t.Fatalf("%s is not compiled by the %s tag alone: this runner builds the default build", file, tag)
	}
	for i, pkg := range pkgs {
		pkgs[i] = "../../" + pkg
	}
	runIn(t, tags, nil, pkgs)
}

// runIn runs the named tests of pkgs (all of them if names is nil) with go
// test in the build tag sets (a mutant switched on stays on in there) and
// fails t with the output if they fail.
func runIn(t *testing.T, tags string, names, pkgs []string) {
	statSources(t)
	goTool, err := exec.LookPath("go") // go test puts its own GOROOT/bin first on PATH
	if err != nil {
		t.Fatalf("the go command, to build the %s tests: %v", tags, err)
	}
	args := []string{"test", "-timeout", "5m"}
	if names != nil { // nil: the packages' whole suites
		args = append(args, "-run", "^("+strings.Join(names, "|")+")$")
	}
	if os.Getenv(mutant.Env) != "" {
		// go test's cache does not see the variable (internal/mutant reads it
		// in an init, before the test log starts): without -count=1 a mutant
		// gets the cached pass of the one before it, in the same build.
		tags += " refalloc_mutants"
		args = append(args, "-count=1")
	}
	args = append(args, "-tags", tags)
	if testing.Short() {
		args = append(args, "-short")
	}
	args = append(args, pkgs...)
	cmd := exec.Command(goTool, args...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		t.Fatalf("go %s: %v\n%s", strings.Join(args, " "), err, out.Bytes())
	}
	if testing.Verbose() {
		t.Logf("%d tests: %v\n%s", len(names), names, out.Bytes())
	}
}

// statSources stats every file of the module (its sources, go.mod, the fuzz
// corpora under testdata): go test caches a test's result keyed by the files
// the test binary itself opened or stat'ed, and the go test run inside runIn
// builds from all of them. Without this an
// edit to spec/, oracle/ or internal/ (or, for a -run of one runner, to impl/)
// left this package "(cached)" and the other build's suites unrun.
func statSources(t *testing.T) {
	err := filepath.WalkDir("../..", func(path string, d os.DirEntry, err error) error {
		switch {
		case err != nil:
			return err
		case d.IsDir() && path != "../.." && (strings.HasPrefix(d.Name(), ".") || path == "../../bench" || path == "../../arrow"):
			return filepath.SkipDir // .git, and the modules of their own
		case !d.IsDir():
			_, err := os.Stat(path)
			return err
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
