package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
)

// statsGroups are cmd/statsbench's groups, in report order.
var statsGroups = []string{"small", "medium", "mixed"}

// statsRun is one run of one of the two statsbench builds.
type statsRun struct {
	Pair    int
	Stats   bool               // the counters build
	NsMin   map[string]float64 // per group: the fastest round, ns per pair
	Foreign float64
	Err     string
}

// goTool finds the go command that builds the two statsbench binaries.
func goTool() string {
	if p, err := exec.LookPath("go"); err == nil {
		return p
	}
	return filepath.Join(runtime.GOROOT(), "bin", "go")
}

// runStats builds cmd/statsbench with and without the statistics counters and
// runs the two builds alternately, on first in even pairs and off first in
// odd ones, so that drifts of the machine's speed hit both alike.
func (r *runner) runStats() error {
	dir, err := os.MkdirTemp("", "allocbench-stats")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	bins := map[bool]string{true: filepath.Join(dir, "statsbench-on"), false: filepath.Join(dir, "statsbench-off")}
	for on, bin := range bins {
		args := []string{"build", "-o", bin}
		if !on {
			args = append(args, "-tags", "refalloc_nostats")
		}
		cmd := exec.Command(goTool(), append(args, "./cmd/statsbench")...)
		cmd.Dir = r.modDir
		if out, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("go build statsbench: %v: %s", err, out)
		}
	}
	args := []string{"-rounds", strconv.Itoa(r.o.statsRounds)}
	if r.o.quick {
		args = append(args, "-small-iters", "10000", "-medium-iters", "2000", "-mixed-iters", "1000")
	}
	for p := 1; p <= r.o.statsPairs; p++ {
		order := []bool{true, false}
		if p%2 == 0 {
			order = []bool{false, true}
		}
		for _, on := range order {
			s := runStatsbench(bins[on], args)
			s.Pair, s.Stats = p, on
			if s.Err == "" && s.Stats != on {
				s.Err = fmt.Sprintf("the build with counters=%s saw counters=%s: the build tag did not take", onOff(on), onOff(s.Stats))
			}
			s.Stats = on
			if s.Err != "" {
				r.notes = append(r.notes, "stats run failed: "+s.Err)
			}
			r.stats = append(r.stats, s)
			res := "FAILED"
			if s.Err == "" {
				res = fmt.Sprintf("small %.2f medium %.2f mixed %.2f ns", s.NsMin["small"], s.NsMin["medium"], s.NsMin["mixed"])
			}
			r.progress(fmt.Sprintf("stats pair %d/%d counters=%s", p, r.o.statsPairs, onOff(on)), res, s.Foreign)
		}
	}
	return nil
}

func onOff(b bool) string {
	if b {
		return "on"
	}
	return "off"
}

func runStatsbench(bin string, args []string) statsRun {
	var out bytes.Buffer
	cmd := exec.Command(bin, args...)
	cmd.Stdout = &out
	cmd.Stderr = os.Stderr
	c0 := sampleCPU(0)
	err := cmd.Run()
	c1 := sampleCPU(0)
	s := statsRun{NsMin: map[string]float64{}}
	if cmd.ProcessState != nil {
		// The child's CPU is "own" time: only the rest is foreign.
		c1.own = (cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime()).Seconds()
	}
	s.Foreign = foreignPct(c0, c1)
	if err != nil {
		s.Err = err.Error()
		return s
	}
	var res struct {
		Stats  bool
		Groups map[string][]float64
	}
	if err := json.Unmarshal(out.Bytes(), &res); err != nil {
		s.Err = err.Error()
		return s
	}
	s.Stats = res.Stats
	for g, v := range res.Groups {
		s.NsMin[g] = slices.Min(v)
	}
	return s
}
