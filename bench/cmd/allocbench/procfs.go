package main

import (
	"bufio"
	"bytes"
	"os"
	"runtime"
	"runtime/metrics"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// userHZ is the unit of /proc/stat. It is 100 on every Linux the suite runs
// on; reading it would take sysconf, i.e. cgo.
const userHZ = 100

// cpuSample is what the load accounting needs at one instant: the machine's
// busy time from /proc/stat and this process's own CPU time. Busy time minus
// own time over an interval is the CPU that other processes used, the same
// accounting as bench/c/run.sh.
type cpuSample struct {
	wall time.Time
	busy float64 // seconds, all CPUs
	own  float64 // seconds, this process (or its children, see childCPU)
}

func machineBusy() float64 {
	data, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0
	}
	line, _, _ := bytes.Cut(data, []byte("\n"))
	f := strings.Fields(string(line))
	if len(f) < 9 || f[0] != "cpu" {
		return 0
	}
	// user nice system idle iowait irq softirq steal: busy excludes idle and iowait.
	var busy float64
	for _, i := range []int{1, 2, 3, 6, 7, 8} {
		v, _ := strconv.ParseFloat(f[i], 64)
		busy += v
	}
	return busy / userHZ
}

// ownUserSys is this process's user and system (kernel) CPU time so far.
func ownUserSys() (user, sys float64) {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0, 0
	}
	return tvSeconds(ru.Utime), tvSeconds(ru.Stime)
}

func tvSeconds(tv syscall.Timeval) float64 {
	return float64(tv.Sec) + float64(tv.Usec)*1e-6
}

func sampleCPU(own float64) cpuSample {
	return cpuSample{wall: time.Now(), busy: machineBusy(), own: own}
}

// foreignPct is the CPU other processes used between a and b, as a percentage
// of all the machine's CPUs (0–100). /proc/stat counts in 10 ms ticks, so on
// intervals under ~0.1 s it is coarse; it is clamped to 0–100.
func foreignPct(a, b cpuSample) float64 {
	wall := b.wall.Sub(a.wall).Seconds()
	if wall <= 0 {
		return 0
	}
	f := (b.busy - a.busy) - (b.own - a.own)
	return min(100, max(0, 100*f/(wall*float64(runtime.NumCPU()))))
}

// gcSample is the GC's cost so far: its CPU time as the runtime estimates it,
// and the exact total of stop-the-world pauses.
type gcSample struct {
	cpu    float64
	pause  float64
	cycles uint32
}

func sampleGC() gcSample {
	s := []metrics.Sample{{Name: "/cpu/classes/gc/total:cpu-seconds"}}
	metrics.Read(s)
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	g := gcSample{pause: float64(ms.PauseTotalNs) * 1e-9, cycles: ms.NumGC}
	if s[0].Value.Kind() == metrics.KindFloat64 {
		g.cpu = s[0].Value.Float64()
	}
	return g
}

// statusKB reads a "Name:   N kB" field of /proc/self/status, in bytes.
func statusKB(name string) int64 {
	f, err := os.Open("/proc/self/status")
	if err != nil {
		return -1
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), name+":"); ok {
			v, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			return v << 10
		}
	}
	return -1
}

// resetPeakRSS makes VmHWM start again from the current RSS, so that the peak
// belongs to the workload, not to process start-up.
func resetPeakRSS() {
	_ = os.WriteFile("/proc/self/clear_refs", []byte("5"), 0)
}

// mappingRSS is the resident memory (smaps Rss) of the mappings that overlap
// [start, start+size): what the kernel really holds for refalloc's reservation.
func mappingRSS(start, size uintptr) int64 {
	f, err := os.Open("/proc/self/smaps")
	if err != nil {
		return -1
	}
	defer f.Close()
	var total int64
	in := false
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		if lo, hi, ok := mapRange(line); ok {
			in = lo < start+size && hi > start
			continue
		}
		if rest, ok := strings.CutPrefix(line, "Rss:"); ok && in {
			v, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			total += v << 10
		}
	}
	return total
}

// mapRange parses the "lo-hi perms ..." header line of an smaps entry.
func mapRange(line string) (lo, hi uintptr, ok bool) {
	r, _, found := strings.Cut(line, " ")
	if !found {
		return 0, 0, false
	}
	a, b, found := strings.Cut(r, "-")
	if !found {
		return 0, 0, false
	}
	x, err1 := strconv.ParseUint(a, 16, 64)
	y, err2 := strconv.ParseUint(b, 16, 64)
	if err1 != nil || err2 != nil {
		return 0, 0, false
	}
	return uintptr(x), uintptr(y), true
}

func cpuModel() string {
	data, _ := os.ReadFile("/proc/cpuinfo")
	for _, line := range strings.Split(string(data), "\n") {
		if k, v, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(k) == "model name" {
			return strings.TrimSpace(v)
		}
	}
	return "unknown CPU"
}
