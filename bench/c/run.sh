#!/usr/bin/env bash
# run.sh - build the C anchor benchmarks and run them under glibc malloc and,
# via LD_PRELOAD, under mimalloc, jemalloc and tcmalloc (Debian packages).
#
# usage: bash bench/c/run.sh [-quick] [-runs N] [-threads "1 2"] [-out DIR]
#                            [-workloads "LIST"] [-allocators "LIST"]
#
#   -quick          short durations / fewer iterations (whole script < ~2 min)
#   -runs N         repetitions (default 5); interleaved: for each run, every
#                   workload is run once under every allocator, side by side
#   -threads LIST   thread counts for the multi-threaded workloads (default "1 2")
#   -out DIR        results directory (default bench/results of this repo)
#   -workloads LIST subset of: larson-8-1000 larson-100-200 threadtest
#                   cache-thrash cache-scratch xmalloc-test pair-keep1
#                   pair-batch1000 (default: all)
#   -allocators LIST subset of: glibc mimalloc jemalloc tcmalloc (default: all)
#   -noise PCT      if other processes used more than PCT% of the CPUs during a
#                   run of >= 0.1 s, measure it again (default 15) ...
#   -retries N      ... at most N times per measurement (default 2, quick 1;
#                   0 = never; in all at most half as many retries as measurements)
#
# Output: one markdown table per workload on stdout (also in DIR/c-anchors.md),
# one CSV row per single run in DIR/c-anchors.csv
# (workload,threads,metric,allocator,run,value), the other processes' CPU
# share during each recorded run in DIR/c-anchors-cpu.csv, and every program's
# raw output in DIR/c-anchors.log. See bench/c/README.md.
set -u

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO=$(cd "$HERE/../.." && pwd)

QUICK=0
RUNS=5
THREADS="1 2"
OUT="$REPO/bench/results"
ALL_WORKLOADS="larson-8-1000 larson-100-200 threadtest cache-thrash cache-scratch xmalloc-test pair-keep1 pair-batch1000"
WORKLOADS="$ALL_WORKLOADS"
ALL_ALLOCATORS="glibc mimalloc jemalloc tcmalloc"
ALLOCATORS="$ALL_ALLOCATORS"
NOISE_PCT=15  # a run during which other processes used more CPU than this (%) ...
MAX_RETRIES=""  # ... is measured again, at most this many times (global cap: half the runs)
TIMEOUT=600   # seconds; a single program run that takes longer is recorded as failed

usage() { awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "${BASH_SOURCE[0]}"; }

while [ $# -gt 0 ]; do
    case "$1" in
    -quick | --quick) QUICK=1 ;;
    -runs | --runs) RUNS=${2:?-runs needs a number}; shift ;;
    -threads | --threads) THREADS=${2:?-threads needs a list}; shift ;;
    -out | --out) OUT=${2:?-out needs a directory}; shift ;;
    -workloads | --workloads) WORKLOADS=${2:?-workloads needs a list}; shift ;;
    -allocators | --allocators) ALLOCATORS=${2:?-allocators needs a list}; shift ;;
    -noise | --noise) NOISE_PCT=${2:?-noise needs a percentage}; shift ;;
    -retries | --retries) MAX_RETRIES=${2:?-retries needs a number}; shift ;;
    -h | -help | --help) usage; exit 0 ;;
    *) echo "run.sh: unknown argument '$1'" >&2; usage >&2; exit 2 ;;
    esac
    shift
done
case "$RUNS" in '' | *[!0-9]* | 0) echo "run.sh: -runs must be a positive integer" >&2; exit 2 ;; esac
[ -n "$MAX_RETRIES" ] || MAX_RETRIES=$([ "$QUICK" = 1 ] && echo 1 || echo 2)
case "$MAX_RETRIES" in '' | *[!0-9]*) echo "run.sh: -retries must be a non-negative integer" >&2; exit 2 ;; esac
case "$NOISE_PCT" in '' | *[!0-9.]*) echo "run.sh: -noise must be a number" >&2; exit 2 ;; esac
for t in $THREADS; do
    case "$t" in '' | *[!0-9]* | 0) echo "run.sh: bad thread count '$t'" >&2; exit 2 ;; esac
done
for w in $WORKLOADS; do
    case " $ALL_WORKLOADS " in *" $w "*) ;; *) echo "run.sh: unknown workload '$w'" >&2; exit 2 ;; esac
done
for a in $ALLOCATORS; do
    case " $ALL_ALLOCATORS " in *" $a "*) ;; *) echo "run.sh: unknown allocator '$a'" >&2; exit 2 ;; esac
done

# ---------------------------------------------------------------- parameters
# Default mode: canonical parameters, except that timed workloads (larson,
# xmalloc-test) run 3 s instead of the published 5 s so that a 5-run default
# run stays around 10 minutes. Quick mode cuts every workload ~5-10x.
if [ "$QUICK" = 1 ]; then
    LARSON_SECS=1
    TT_ITERS=200            # threadtest iterations (canonical 1000)
    CACHE_REPS=200000       # cache-* repetitions (canonical 2000000)
    XM_SECS=1
    PAIR_KEEP_N=5000000
    PAIR_BATCH_N=2000000
else
    LARSON_SECS=3
    TT_ITERS=1000
    CACHE_REPS=2000000
    XM_SECS=3
    PAIR_KEEP_N=50000000
    PAIR_BATCH_N=20000000
fi

# cmd_for WORKLOAD THREADS -> prints the command line (relative to $HERE)
cmd_for() {
    local w=$1 t=$2
    case "$w" in
    larson-8-1000) echo "./larson $LARSON_SECS 8 1000 5000 100 4141 $t" ;;
    larson-100-200) echo "./larson $LARSON_SECS 100 200 5000 100 4141 $t" ;;
    threadtest) echo "./threadtest $t $TT_ITERS 10000 0 8" ;;
    cache-thrash) echo "./cache-thrash $t 1000 1 $CACHE_REPS" ;;
    cache-scratch) echo "./cache-scratch $t 1000 1 $CACHE_REPS" ;;
    xmalloc-test) echo "./xmalloc-test -w $t -t $XM_SECS -s 64 -b 4096 -q 100" ;;
    pair-keep1) echo "./pair -m keep1 -s 64 -n $PAIR_KEEP_N" ;;
    pair-batch1000) echo "./pair -m batch1000 -s 64 -n $PAIR_BATCH_N" ;;
    esac
}

# single-threaded workloads ignore -threads
threads_for() {
    case "$1" in pair-*) echo 1 ;; *) echo "$THREADS" ;; esac
}

# ---------------------------------------------------------------- build
echo "== building in $HERE"
if ! make -C "$HERE" -s all; then
    echo "run.sh: build failed" >&2
    exit 1
fi

# ---------------------------------------------------------------- allocators
pkg_of() {
    case "$1" in
    mimalloc) echo libmimalloc2.0 ;;
    jemalloc) echo libjemalloc2 ;;
    tcmalloc) echo libtcmalloc-minimal4 ;;
    esac
}
soname_re_of() {
    case "$1" in
    mimalloc) echo 'libmimalloc\.so(\.[0-9]+)*$' ;;
    jemalloc) echo 'libjemalloc\.so(\.[0-9]+)*$' ;;
    tcmalloc) echo 'libtcmalloc_minimal\.so(\.[0-9]+)*$' ;;
    esac
}
glob_of() {
    case "$1" in
    mimalloc) echo 'libmimalloc.so*' ;;
    jemalloc) echo 'libjemalloc.so*' ;;
    tcmalloc) echo 'libtcmalloc_minimal.so*' ;;
    esac
}

pkg_installed() {
    dpkg-query -W -f='${Status}' "$1" 2>/dev/null | grep -q 'install ok installed'
}

APT_UPDATED=0
ensure_pkg() {
    local pkg=$1 sudo=""
    pkg_installed "$pkg" && return 0
    if ! command -v apt-get >/dev/null 2>&1; then
        echo "   apt-get not available: cannot install $pkg" >&2
        return 1
    fi
    if [ "$(id -u)" != 0 ]; then
        if command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then
            sudo="sudo -n"
        else
            echo "   not root and no password-less sudo: cannot install $pkg" >&2
            return 1
        fi
    fi
    echo "   installing $pkg with apt-get ..."
    if DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -q --no-install-recommends "$pkg" >"$OUT/apt-$pkg.log" 2>&1; then
        return 0
    fi
    if [ "$APT_UPDATED" = 0 ]; then
        APT_UPDATED=1
        echo "   apt-get install failed; running apt-get update and retrying ..."
        DEBIAN_FRONTEND=noninteractive $sudo apt-get update -q >>"$OUT/apt-$pkg.log" 2>&1
        if DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -q --no-install-recommends "$pkg" >>"$OUT/apt-$pkg.log" 2>&1; then
            return 0
        fi
    fi
    echo "   apt-get could not install $pkg (see $OUT/apt-$pkg.log)" >&2
    return 1
}

find_so() {
    local name=$1 pkg re f
    pkg=$(pkg_of "$name")
    re=$(soname_re_of "$name")
    if pkg_installed "$pkg"; then
        for f in $(dpkg -L "$pkg" 2>/dev/null | grep -E "$re"); do
            if [ -e "$f" ]; then echo "$f"; return 0; fi
        done
    fi
    for f in /usr/lib/x86_64-linux-gnu/$(glob_of "$name") /usr/lib/*/$(glob_of "$name") /usr/lib/$(glob_of "$name") /usr/local/lib/$(glob_of "$name"); do
        # skip the unversioned dev symlink if a versioned one exists; any works for preload
        if [ -e "$f" ]; then echo "$f"; return 0; fi
    done
    return 1
}

mkdir -p "$OUT" || { echo "run.sh: cannot create $OUT" >&2; exit 1; }
OUT=$(cd "$OUT" && pwd)

declare -A SO
ACTIVE=""
echo "== allocators"
for a in $ALLOCATORS; do
    if [ "$a" = glibc ]; then
        SO[glibc]=""
        ACTIVE="$ACTIVE glibc"
        echo "   glibc: system malloc ($(ldd --version 2>/dev/null | head -1 | sed 's/.* //'))"
        continue
    fi
    pkg=$(pkg_of "$a")
    if ! ensure_pkg "$pkg"; then
        echo "   $a: SKIPPED - package $pkg could not be installed; its column is reported as n/a"
        continue
    fi
    if ! so=$(find_so "$a"); then
        echo "   $a: SKIPPED - no shared library found for $pkg; its column is reported as n/a"
        continue
    fi
    # Check that the library really gets preloaded (ld.so only warns if not).
    if ! LD_PRELOAD="$so" cat /proc/self/maps 2>/dev/null | grep -qF "$(basename "$(readlink -f "$so")")"; then
        echo "   $a: SKIPPED - LD_PRELOAD=$so did not load; its column is reported as n/a"
        continue
    fi
    SO[$a]=$so
    ACTIVE="$ACTIVE $a"
    ver=$(dpkg-query -W -f='${Version}' "$pkg" 2>/dev/null)
    echo "   $a: $so ($pkg $ver)"
done

# ---------------------------------------------------------------- run
CSV="$OUT/c-anchors.csv"
LOG="$OUT/c-anchors.log"
MD="$OUT/c-anchors.md"
echo "workload,threads,metric,allocator,run,value" >"$CSV"
CPU_CSV="$OUT/c-anchors-cpu.csv"
echo "workload,threads,allocator,run,foreign_cpu_pct,retries" >"$CPU_CSV"
{
    echo "# refalloc C anchor run $(date -u '+%Y-%m-%dT%H:%M:%SZ')"
    echo "# host: $(uname -srm), $(nproc) CPUs, $(grep -m1 'model name' /proc/cpuinfo | sed 's/.*: //')"
    echo "# mode: $([ "$QUICK" = 1 ] && echo quick || echo default), runs=$RUNS, threads=\"$THREADS\""
} >"$LOG"

ALLOC_ARR=($ACTIVE)
NALLOC=${#ALLOC_ARR[@]}
if [ "$NALLOC" = 0 ]; then
    echo "run.sh: no allocator to run" >&2
    exit 1
fi

# CPU accounting, to detect other processes competing for this machine's
# cores during a run: busy jiffies of the whole machine (from /proc/stat)
# minus the CPU time of the benchmark itself = "foreign" CPU time.
HZ=$(getconf CLK_TCK 2>/dev/null || echo 100)
NCPU=$(nproc)
stat_busy() { # prints busy and total jiffies of all CPUs
    local _c u n s i w irq sirq st _rest
    read -r _c u n s i w irq sirq st _rest </proc/stat
    echo "$((u + n + s + irq + sirq + st)) $((u + n + s + i + w + irq + sirq + st))"
}

# run_one ALLOC CMD: runs CMD under ALLOC; on success sets RES (the RESULT
# line) and FOREIGN (foreign CPU as % of the machine during the run).
TMPD=$(mktemp -d)
trap 'rm -rf "$TMPD"' EXIT
run_one() {
    local alloc=$1 cmd=$2 rc b0 t0 b1 t1 own wall foreign
    local pre=""
    [ "$alloc" = glibc ] || pre="LD_PRELOAD=${SO[$alloc]}"
    RES="" FOREIGN="" WALL=0
    read -r b0 t0 < <(stat_busy)
    local w0; w0=$(date +%s.%N)
    {
        TIMEFORMAT='%3U %3S'
        time (cd "$HERE" && env $pre timeout "$TIMEOUT" $cmd >"$TMPD/out" 2>&1)
    } 2>"$TMPD/time"
    rc=$?
    local w1; w1=$(date +%s.%N)
    read -r b1 t1 < <(stat_busy)
    own=$(awk '{ print $1 + $2 }' "$TMPD/time" 2>/dev/null)
    foreign=$(awk -v b="$((b1 - b0))" -v hz="$HZ" -v own="${own:-0}" -v w0="$w0" -v w1="$w1" -v n="$NCPU" \
        'BEGIN { wall = w1 - w0; f = b / hz - own; if (f < 0) f = 0; if (wall <= 0) wall = 1e-9;
                 printf "%.1f", 100 * f / (wall * n) }')
    {
        echo "## alloc=$alloc cmd=$cmd rc=$rc own_cpu_s=${own:-?} foreign_cpu_pct=$foreign"
        cat "$TMPD/out"
    } >>"$LOG"
    [ $rc = 0 ] || return 1
    RES=$(grep '^RESULT ' "$TMPD/out" | tail -1)
    FOREIGN=$foreign
    WALL=$(awk -v a="$w0" -v b="$w1" 'BEGIN { printf "%.3f", b - a }')
    [ -n "$RES" ]
}

field() { # field NAME LINE
    printf '%s\n' "$2" | tr ' ' '\n' | sed -n "s/^$1=//p"
}

# Warn if something else is already using the CPUs: it makes results noisy.
read -r b0 t0 < <(stat_busy)
sleep 1
read -r b1 t1 < <(stat_busy)
IDLE_BUSY=$(awk -v b="$((b1 - b0))" -v t="$((t1 - t0))" 'BEGIN { printf "%.0f", (t > 0 ? 100 * b / t : 0) }')
if [ "$IDLE_BUSY" -gt 10 ]; then
    echo "   WARNING: other processes are using ${IDLE_BUSY}% of the CPUs before the benchmark starts; results will be noisy"
fi
START=$(date +%s)
echo "== running: runs=$RUNS, threads=\"$THREADS\", mode=$([ "$QUICK" = 1 ] && echo quick || echo default), allocators:$ACTIVE"
FAILS=0
RETRIES=0
NMEAS=0
for w in $WORKLOADS; do for t in $(threads_for "$w"); do NMEAS=$((NMEAS + 1)); done; done
NMEAS=$((NMEAS * NALLOC * RUNS))
RETRY_BUDGET=$((NMEAS / 2))
[ "$MAX_RETRIES" -gt 0 ] || RETRY_BUDGET=0
for run in $(seq 1 "$RUNS"); do
    for w in $WORKLOADS; do
        for t in $(threads_for "$w"); do
            cmd=$(cmd_for "$w" "$t")
            # rotate the allocator order from run to run so no allocator
            # always runs first (or right after the same neighbour)
            line_out=""
            for k in $(seq 0 $((NALLOC - 1))); do
                a=${ALLOC_ARR[$(((k + run - 1) % NALLOC))]}
                attempt=0
                while :; do
                    if ! run_one "$a" "$cmd"; then
                        FAILS=$((FAILS + 1))
                        line_out="$line_out $a=FAILED"
                        echo "   run $run: $w T=$t under $a FAILED (see $LOG)" >&2
                        break
                    fi
                    # Other processes took a noticeable share of the CPUs during
                    # a run long enough to measure that reliably: measure again.
                    if [ "$attempt" -lt "$MAX_RETRIES" ] && [ "$RETRIES" -lt "$RETRY_BUDGET" ] &&
                        awk -v f="$FOREIGN" -v lim="$NOISE_PCT" -v w="$WALL" 'BEGIN { exit !(f > lim && w >= 0.1) }'; then
                        attempt=$((attempt + 1))
                        RETRIES=$((RETRIES + 1))
                        echo "## (foreign CPU ${FOREIGN}% > ${NOISE_PCT}%: measuring again, attempt $((attempt + 1)))" >>"$LOG"
                        sleep 0.5
                        continue
                    fi
                    wl=$(field workload "$RES")
                    th=$(field threads "$RES")
                    me=$(field metric "$RES")
                    va=$(field value "$RES")
                    echo "$wl,$th,$me,$a,$run,$va" >>"$CSV"
                    echo "$wl,$th,$a,$run,$FOREIGN,$attempt" >>"$CPU_CSV"
                    line_out="$line_out $a=$va"
                    [ "$attempt" = 0 ] || line_out="$line_out(retried $attempt)"
                    break
                done
            done
            printf '   [run %d/%d %4ds] %-15s T=%-2s%s\n' "$run" "$RUNS" $(($(date +%s) - START)) "$w" "$t" "$line_out"
        done
    done
done

# ---------------------------------------------------------------- derived rows
# Speedup of T>1 over T=1 for the false-sharing workloads, per run and
# allocator (same run index, so the two measurements were taken close together).
awk -F, 'NR > 1 && ($1 == "cache-thrash" || $1 == "cache-scratch") && $3 == "s" {
        v[$1 SUBSEP $2 SUBSEP $4 SUBSEP $5] = $6
        if (!(($1 SUBSEP $2) in seen)) { seen[$1 SUBSEP $2] = 1; ord[++n] = $1 SUBSEP $2 }
        al[$4 SUBSEP $5] = 1
    }
    END {
        for (i = 1; i <= n; i++) {
            split(ord[i], p, SUBSEP)
            if (p[2] == 1) continue
            for (ar in al) {
                split(ar, q, SUBSEP)
                k1 = p[1] SUBSEP 1 SUBSEP q[1] SUBSEP q[2]
                kt = p[1] SUBSEP p[2] SUBSEP q[1] SUBSEP q[2]
                if ((k1 in v) && (kt in v) && v[kt] > 0)
                    printf "%s,%s,speedup-vs-T1,%s,%s,%.4f\n", p[1], p[2], q[1], q[2], v[k1] / v[kt]
            }
        }
    }' "$CSV" | sort -t, -k1,1 -k2,2n -k4,4 -k5,5n >"$CSV.speedup"
cat "$CSV.speedup" >>"$CSV"
rm -f "$CSV.speedup"

# ---------------------------------------------------------------- tables
ALLOC_HEADER="$ALL_ALLOCATORS"
awk -F, -v allocs="$ALLOC_HEADER" '
    function fmt(x) {
        if (x >= 100) return sprintf("%.0f", x)
        if (x >= 10) return sprintf("%.1f", x)
        if (x >= 1) return sprintf("%.2f", x)
        return sprintf("%.3f", x)
    }
    function higher_better(m) { return (m == "Mops/s" || m == "M/s" || m == "speedup-vs-T1") }
    NR == 1 { next }
    {
        wl = $1; row = $1 SUBSEP $2 SUBSEP $3
        if (!(wl in wseen)) { wseen[wl] = 1; word[++nw] = wl }
        if (!(row in rseen)) { rseen[row] = 1; nr[wl]++; rord[wl, nr[wl]] = row }
        k = row SUBSEP $4
        cnt[k]++; val[k, cnt[k]] = $6 + 0
    }
    END {
        na = split(allocs, A, " ")
        for (i = 1; i <= nw; i++) {
            wl = word[i]
            printf "| workload | threads | metric |"
            for (j = 1; j <= na; j++) printf " %s |", A[j]
            printf " best |\n"
            printf "|---|---|---|"
            for (j = 1; j <= na; j++) printf "---|"
            printf "---|\n"
            for (r = 1; r <= nr[wl]; r++) {
                row = rord[wl, r]
                split(row, p, SUBSEP)
                printf "| %s | %s | %s |", p[1], p[2], p[3]
                best = ""; bestv = 0
                for (j = 1; j <= na; j++) {
                    k = row SUBSEP A[j]
                    n = cnt[k] + 0
                    if (n == 0) { printf " n/a |"; continue }
                    # insertion sort of this cell
                    for (x = 1; x <= n; x++) s[x] = val[k, x]
                    for (x = 2; x <= n; x++) {
                        y = s[x]; z = x - 1
                        while (z >= 1 && s[z] > y) { s[z + 1] = s[z]; z-- }
                        s[z + 1] = y
                    }
                    if (n % 2) med = s[(n + 1) / 2]; else med = (s[n / 2] + s[n / 2 + 1]) / 2
                    if (n == 1) printf " %s |", fmt(med)
                    else printf " %s (%s–%s) |", fmt(med), fmt(s[1]), fmt(s[n])
                    if (best == "" || (higher_better(p[3]) ? med > bestv : med < bestv)) { best = A[j]; bestv = med }
                }
                printf " %s |\n", (best == "" ? "n/a" : best)
            }
            printf "\n"
        }
    }' "$CSV" >"$MD.tables"

ELAPSED=$(($(date +%s) - START))
FOREIGN_SUMMARY=$(awk -F, -v lim="$NOISE_PCT" -v retries="$RETRIES" 'NR > 1 { n++; v[n] = $5 + 0; if ($5 + 0 > lim) hi++ }
    END {
        if (n == 0) { print "Other processes: no data."; exit }
        for (x = 2; x <= n; x++) { y = v[x]; z = x - 1; while (z >= 1 && v[z] > y) { v[z + 1] = v[z]; z-- } v[z + 1] = y }
        printf "CPU used by other processes during the recorded runs (%% of all CPUs): median %.1f, max %.1f; %d of %d runs above %s%%; %d runs were measured again (per run: c-anchors-cpu.csv).", (n % 2 ? v[(n + 1) / 2] : (v[n / 2] + v[n / 2 + 1]) / 2), v[n], hi, n, lim, retries
    }' "$CPU_CSV")
{
    echo "# C allocator anchors ($(date -u '+%Y-%m-%d %H:%M UTC'))"
    echo
    echo "Host: $(uname -srm), $(nproc) CPUs ($(grep -m1 'model name' /proc/cpuinfo | sed 's/.*: //')). Mode: $([ "$QUICK" = 1 ] && echo quick || echo default); runs=$RUNS (interleaved); threads=\"$THREADS\"."
    echo "Allocators:"
    for a in $ALL_ALLOCATORS; do
        case " $ACTIVE " in
        *" $a "*) if [ "$a" = glibc ]; then echo "- glibc: system malloc"; else echo "- $a: ${SO[$a]} ($(pkg_of "$a") $(dpkg-query -W -f='${Version}' "$(pkg_of "$a")" 2>/dev/null))"; fi ;;
        *) echo "- $a: n/a (not run)" ;;
        esac
    done
    echo
    echo "CPU used by other processes in the 1 s before the benchmark: ${IDLE_BUSY}%."
    echo "Cells: median (min–max) over the runs. Metrics: Mops/s and M/s higher is better; s and ns lower is better;"
    echo "speedup-vs-T1 = time(T=1)/time(T) of the same run, higher is better (ideal = T)."
    echo
    cat "$MD.tables"
    echo "$FOREIGN_SUMMARY"
    echo "Benchmark time: ${ELAPSED} s; failed program runs: $FAILS."
} >"$MD"
rm -f "$MD.tables"

echo
sed -n '/^| workload/,$p' "$MD"
echo
echo "== wrote $CSV, $MD and $LOG"
[ "$FAILS" = 0 ] || exit 1
exit 0
