// Under -race, and in the builds that already have (or replace) these tests,
// there is nothing to add: CI runs them there itself.
//go:build !race && !refalloc_yield && !refalloc_check && !refalloc_portable

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

// packages hold the refalloc_yield build's tests, relative to this directory.
var packages = []string{"../../impl", "../../invariants", "../../fuzz"}

// TestYieldBuild runs every test and fuzz target (its seeds) of a file that
// only the refalloc_yield build compiles, in that build. A mutant switched on
// (cmd/mutants with -tags ”) is switched on in there too.
func TestYieldBuild(t *testing.T) {
	names := yieldOnly(t)
	if len(names) < 20 {
		t.Fatalf("found only %d refalloc_yield tests (%v): the file scan is broken", len(names), names)
	}
	goTool, err := exec.LookPath("go") // go test puts its own GOROOT/bin first on PATH
	if err != nil {
		t.Fatalf("the go command, to build the refalloc_yield tests: %v", err)
	}
	tags := "refalloc_yield"
	if os.Getenv(mutant.Env) != "" {
		tags += " refalloc_mutants"
	}
	args := []string{"test", "-tags", tags, "-timeout", "5m",
		"-run", "^(" + strings.Join(names, "|") + ")$"}
	if testing.Short() {
		args = append(args, "-short")
	}
	args = append(args, packages...)
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

var testFunc = regexp.MustCompile(`^(Test|Fuzz)([^a-z]|$)`)

// yieldOnly lists the tests and fuzz targets declared in the packages' files
// whose build constraint needs refalloc_yield: false without it, true with it
// (every other tag off, as in the default build).
func yieldOnly(t *testing.T) []string {
	var names []string
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
			if !needsYield(t, af) {
				continue
			}
			for _, d := range af.Decls {
				if fd, ok := d.(*ast.FuncDecl); ok && fd.Recv == nil && testFunc.MatchString(fd.Name.Name) {
					names = append(names, fd.Name.Name)
				}
			}
		}
	}
	slices.Sort(names)
	return slices.Compact(names)
}

// needsYield reports whether f's //go:build line is false in the default
// build and true once refalloc_yield is set.
func needsYield(t *testing.T, f *ast.File) bool {
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
			with := func(yield bool) bool {
				return x.Eval(func(tag string) bool {
					return tag == "refalloc_yield" && yield || tag == runtime.GOOS || tag == runtime.GOARCH || tag == runtime.Compiler
				})
			}
			return !with(false) && with(true)
		}
	}
	return false
}
