#!/usr/bin/env bash
# Side-by-side allreduce (f32, sum) of weft, Open MPI and Gloo on this machine, with the same
# sizes, iterations and timing rule (max over ranks of the mean time).
#
#   bench/compare.sh [-n RANKS] [-b MIN] [-e MAX] [-f FACTOR] [-i ITERS] [-w WARMUP]
#                    [-s SMALL_ITERS] [-r ROUNDS] [-t tcp|shm] [--build-dir DIR] [--no-setup]
#                    [--plot FILE.png]
#
# Sizes below 1 MiB run SMALL_ITERS iterations (default 1000, after a tenth of that as warm-up):
# ten calls of a few microseconds each measure start-up skew and scheduler noise, not the library.
# -t tcp (default): weft and Open MPI over TCP on loopback. -t shm: weft over shared memory
# against Open MPI's shared-memory BTL (vader) twice, as shipped ("mpi") and with glibc's mmap
# threshold disabled so its per-call buffers are reused ("mpi-nommap"), and single-thread memcpy of
# 64 MiB measured in the same rounds (-t tcp: one loopback TCP stream, bench/loopback_tcp.py).
# Gloo has no shared-memory path: it runs over TCP either way. --plot draws busbw and time per
# call against size for every library, with that limit as a line (bench/plot_bench.py,
# matplotlib); the table behind it is kept as compare-table.tsv in the build directory.
# Installs what it needs (scripts/setup.sh --bench), builds weft and the two baselines
# (bench/baselines/, CMake option WEFT_BUILD_BASELINES) in a separate Release build directory,
# runs the three sweeps plus an 8-byte latency run ROUNDS times, interleaved (weft, mpi, gloo,
# weft, ...), and prints one table of bus bandwidth (out of place, nccl-tests definition:
# algbw * 2(n-1)/n) from the median time of the rounds, and the ratios. Raw outputs are kept in
# the build directory (compare-NAME.rK.txt). Figures vary with load: compare ratios of one run.
set -euo pipefail

ranks=2 min=16 max=64M factor=4 iters=10 warmup=3 small_iters=1000 latency_iters=5000 rounds=3 transport=tcp
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="$root/build-compare"
setup=1 plot=""
usage() { sed -n '4,18p' "$0" | sed 's/^# \{0,1\}//'; exit "${1:-0}"; }
while [ $# -gt 0 ]; do
  case "$1" in
    -n) ranks="$2"; shift 2 ;;
    -b) min="$2"; shift 2 ;;
    -e) max="$2"; shift 2 ;;
    -f) factor="$2"; shift 2 ;;
    -i) iters="$2"; shift 2 ;;
    -w) warmup="$2"; shift 2 ;;
    -s) small_iters="$2"; shift 2 ;;
    -r) rounds="$2"; shift 2 ;;
    -t) transport="$2"; shift 2 ;;
    --build-dir) build="$2"; shift 2 ;;
    --no-setup) setup=0; shift ;;
    --plot) plot="$2"; shift 2 ;;
    -h|--help) usage 0 ;;
    *) echo "compare.sh: unknown option '$1'" >&2; usage 2 ;;
  esac
done

case "$transport" in tcp|shm) ;; *) echo "compare.sh: -t takes tcp or shm" >&2; exit 2 ;; esac
log() { echo "compare.sh [$(date +%H:%M:%S)]: $*" >&2; }

if [ "$setup" = 1 ]; then "$root/scripts/setup.sh" --bench >&2; fi

log "building in $build"
mkdir -p "$build"
cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DWEFT_BUILD_TESTS=OFF \
  -DWEFT_BUILD_BENCH=ON -DWEFT_BUILD_BASELINES=ON >"$build/configure.log" 2>&1 ||
  { cat "$build/configure.log" >&2; exit 1; }
cmake --build "$build" --parallel "$(nproc)" \
  --target weft_tool weft_mpi_allreduce weft_gloo_allreduce weft_reduce_bench >&2

weft="$build/tools/weft"
mpi_prog="$build/bench/weft_mpi_allreduce"
gloo_prog="$build/bench/weft_gloo_allreduce"
limit=300  # seconds per run; a hung library shows up as "-" instead of stalling the script
# TCP only, loopback only, ob1 so the btl choice holds, and no pinning. --oversubscribe only when
# the ranks outnumber the CPUs: it also switches Open MPI to yielding while it polls, which costs
# it milliseconds per message whenever anything else runs on the machine.
mpirun_cmd=(mpirun --allow-run-as-root --bind-to none -np "$ranks" --mca pml ob1)
if [ "$transport" = tcp ]; then
  mpirun_cmd+=(--mca btl tcp,self --mca btl_tcp_if_include lo)
else
  mpirun_cmd+=(--mca btl vader,self)
fi
if [ "$ranks" -gt "$(nproc)" ]; then mpirun_cmd+=(--oversubscribe); fi
# Open MPI with glibc's per-call mmap of large buffers turned off (they are then reused).
nommap=(-x MALLOC_MMAP_MAX_=0 -x MALLOC_TRIM_THRESHOLD_=4294967296 -x MALLOC_TOP_PAD_=268435456)
reduce_bench="$build/bench/weft_reduce_bench"
store_dir="$(mktemp -d)"
rm -f "$build"/compare-*.txt
trap 'rm -rf "$store_dir"' EXIT

# run NAME COMMAND...: output in $build/compare-NAME.r$round.txt; failures are reported, not
# fatal.
run() {
  local name="$1"; shift
  local out="$build/compare-$name.r$round.txt"
  log "round $round/$rounds: running $name"
  local rc=0
  "$@" >"$out" 2>&1 || rc=$?
  if [ "$rc" -ne 0 ]; then
    log "$name failed (exit $rc); last lines:"
    tail -5 "$out" >&2
  fi
}

# SIZE with an optional K/M/G suffix, in bytes.
bytes() {
  local v="${1,,}"
  local n="${v%%[kmg]*}"
  case "$v" in *k*) echo $((n << 10)) ;; *m*) echo $((n << 20)) ;; *g*) echo $((n << 30)) ;;
    *) echo "$n" ;; esac
}
# The sizes of the sweep, split at 1 MiB: the small ones get more iterations.
small=() sweep=()
last_small="" first_large=""
lo="$(bytes "$min")" hi="$(bytes "$max")"
if [ "$lo" -lt 1 ] || [ "$factor" -lt 2 ]; then
  echo "compare.sh: -b must be at least 1 and -f at least 2" >&2; exit 2
fi
for ((s = lo; s <= hi; s *= factor)); do
  if [ "$s" -lt $((1 << 20)) ]; then last_small="$s"; elif [ -z "$first_large" ]; then first_large="$s"; fi
done
if [ -n "$last_small" ]; then
  small=(-b "$lo" -e "$last_small" -f "$factor" -n "$small_iters" -w $((small_iters / 10 + 1)))
fi
if [ -n "$first_large" ]; then
  sweep=(-b "$first_large" -e "$hi" -f "$factor" -n "$iters" -w "$warmup")
fi
# Thousands of calls: runs of a few hundred sub-microsecond calls are mostly start-up skew.
latency=(-b 8 -e 8 -f 2 -n "$latency_iters" -w 200)
# Plaintext links, as Open MPI's and Gloo's: `weft run` jobs encrypt their TCP links by default
# (docs/security.md); the cost of that is measured by the security benchmarks, not here.
launch() { WEFT_SECURITY=off WEFT_TRANSPORT="$transport" "$weft" run -n "$ranks" --timeout "$limit" -- "$@"; }
for round in $(seq 1 "$rounds"); do
  # Gloo's FileStore wants existing, empty directories.
  rm -rf "$store_dir/lat" && mkdir -p "$store_dir/lat"
  for part in small large; do
    if [ "$part" = small ]; then args=("${small[@]}") suffix=-small; else args=("${sweep[@]}") suffix=""; fi
    [ "${#args[@]}" -gt 0 ] || continue
    rm -rf "$store_dir/sweep" && mkdir -p "$store_dir/sweep"
    run "weft$suffix" launch "$weft" bench allreduce "${args[@]}" --check
    run "mpi$suffix" timeout "$limit" "${mpirun_cmd[@]}" "$mpi_prog" "${args[@]}"
    if [ "$transport" = shm ]; then
      run "mpi-nommap$suffix" timeout "$limit" "${mpirun_cmd[@]}" "${nommap[@]}" "$mpi_prog" "${args[@]}"
    fi
    run "gloo$suffix" launch "$gloo_prog" --store "$store_dir/sweep" "${args[@]}"
  done
  run weft-lat launch "$weft" bench allreduce "${latency[@]}"
  run mpi-lat timeout "$limit" "${mpirun_cmd[@]}" "$mpi_prog" "${latency[@]}"
  run gloo-lat launch "$gloo_prog" --store "$store_dir/lat" "${latency[@]}"
  if [ "$transport" = shm ]; then
    run memcpy "$reduce_bench" --benchmark_filter='BM_memcpy/67108864$' --benchmark_min_time=0.5
  else
    run loopback python3 "$root/bench/loopback_tcp.py" 1024 1
  fi
done

# Data rows of every round of one output (both parts of the sweep) as "size time busbw wrong"
# (out-of-place columns), launcher prefix off.
rows() {
  { cat "$build"/compare-"$1".r*.txt "$build"/compare-"$1"-small.r*.txt 2>/dev/null || true; } | sed -E 's/^\[[0-9]+\] //' |
    awk '$1 ~ /^[0-9]+$/ && NF >= 9 { print $1, $6, $8, $9 }'
}

# The median of the numbers on stdin, one per line; nothing if none.
median_lines() {
  sort -n | awk '{ v[NR] = $1 } END { if (NR) print (NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2) }'
}
# Median single-thread memcpy bandwidth (GB/s) of the rounds' BM_memcpy/64 MiB runs; empty if none.
memcpy_gbps() {
  cat "$build"/compare-memcpy.r*.txt 2>/dev/null |
    awk '$1 == "BM_memcpy/67108864" && $3 == "ns" && $2 > 0 { print 67108864 / $2 }' | median_lines
}
# Median loopback TCP stream (GB/s) of the rounds' bench/loopback_tcp.py runs; empty if none.
loopback_gbps() {
  cat "$build"/compare-loopback.r*.txt 2>/dev/null |
    awk '/^loopback TCP, one stream:/ { print $5 }' | median_lines
}

# awk helpers: median of the times collected per size.
median_awk='
  function median(list,   v, k, i, j, x) {
    k = split(list, v, " ")
    for (i = 2; i <= k; ++i) { x = v[i] + 0; for (j = i - 1; j >= 1 && v[j] + 0 > x; --j) v[j + 1] = v[j]; v[j + 1] = x }
    return k == 0 ? "" : (k % 2 ? v[(k + 1) / 2] : (v[k / 2] + v[k / 2 + 1]) / 2)
  }'

echo
if [ "$transport" = tcp ]; then
  echo "allreduce f32 sum, $ranks ranks, TCP loopback, out of place; busbw in GB/s (higher is better),"
else
  echo "allreduce f32 sum, $ranks ranks, weft and mpi over shared memory (gloo: TCP loopback), out of"
  echo "place; busbw in GB/s (higher is better), mpi-nm: Open MPI with glibc's mmap threshold off,"
fi
echo "computed from the median over $rounds rounds of the mean time: size / time * 2(n-1)/n;"
echo "$small_iters iterations per size below 1 MiB, $iters from 1 MiB up"
echo "weft/mpi (the better Open MPI column) and weft/gloo: busbw ratios (> 1: weft faster)." \
  "$(nproc) CPUs, load $(cut -d' ' -f1 /proc/loadavg)"
sizes="$( { rows weft; rows mpi; rows gloo; } | awk '{ print $1 }' | sort -nu | tr '\n' ' ')"
tsv="$build/compare-table.tsv"
if [ "$transport" = shm ]; then
  limit_label="single-thread memcpy, 64 MiB" limit="$(memcpy_gbps)" where="shared memory"
else
  limit_label="one loopback TCP stream" limit="$(loopback_gbps)" where="TCP loopback"
fi
{
  echo "# title: allreduce f32 sum, $ranks ranks, $where (gloo: TCP), median of $rounds rounds," \
    "$(nproc) CPUs, load $(cut -d' ' -f1 /proc/loadavg), $(date -u +%Y-%m-%d)"
  [ -z "$limit" ] || echo "# limit: $limit_label=$limit"
} >"$tsv"
awk -v wf=<(rows weft) -v mf=<(rows mpi) -v nf=<(rows mpi-nommap) -v gf=<(rows gloo) \
  -v sizes="$sizes" -v n="$ranks" -v memcpy="$(memcpy_gbps)" -v tsv="$tsv" \
  "$median_awk"'
  # busbw from size and the median time (more digits than the printed column), wrong counts summed.
  function load(file, bw, wrong, us,   line, f, times, s) {
    while ((getline line < file) > 0) {
      split(line, f, " ")
      if (f[2] + 0 > 0) times[f[1]] = times[f[1]] " " f[2]
      wrong[f[1]] += f[4]
    }
    for (s in times) {
      us[s] = median(times[s])
      bw[s] = s / (us[s] * 1e3) * 2 * (n - 1) / n
    }
  }
  function tv(v) { return v == "" ? "-" : v }
  function ratio(a, b) { return (a == "" || b == "" || b + 0 == 0) ? "-" : sprintf("%.2f", a / b) }
  function cell(v) { return v == "" ? "-" : sprintf(v < 0.01 ? "%.2e" : "%.3f", v) }
  BEGIN {
    load(wf, w, ww, wu); load(mf, m, mw, mu); load(nf, nm, nw, nu); load(gf, g, gw, gu)
    printf "size\tweft busbw\tweft us\tmpi busbw\tmpi us\tmpi-nm busbw\tmpi-nm us\tgloo busbw\tgloo us\n" >> tsv
    printf "%12s %11s %11s %11s %11s %9s %9s\n", "size (B)", "weft", "mpi", "mpi-nm", "gloo",
           "weft/mpi", "weft/gloo"
    count = split(sizes, order, " ")
    for (i = 1; i <= count; ++i) {
      s = order[i]
      best = (nm[s] != "" && nm[s] + 0 > m[s] + 0) ? nm[s] : m[s]
      printf "%12s %11s %11s %11s %11s %9s %9s\n", s, cell(w[s]), cell(m[s]), cell(nm[s]),
             cell(g[s]), ratio(w[s], best), ratio(w[s], g[s])
      printf "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", s, tv(w[s]), tv(wu[s]), tv(m[s]), tv(mu[s]),
             tv(nm[s]), tv(nu[s]), tv(g[s]), tv(gu[s]) >> tsv
      if (ww[s] + mw[s] + nw[s] + gw[s] > 0) bad = bad " " s
      last = s
    }
    if (bad != "") print "WARNING: wrong results at sizes" bad
    if (memcpy != "" && w[last] != "") {
      printf "single-thread memcpy of 64 MiB: %.2f GB/s; weft busbw at %s B is %.0f%% of it\n",
             memcpy, last, 100 * w[last] / memcpy
    }
  }'

echo
echo "8-byte allreduce latency, us, median of $rounds rounds (lower is better); mpi/weft and" \
  "gloo/weft: > 1 means weft faster"
awk -v wf=<(rows weft-lat) -v mf=<(rows mpi-lat) -v gf=<(rows gloo-lat) "$median_awk"'
  function first_time(file,   line, f, list) {
    while ((getline line < file) > 0) { split(line, f, " "); list = list " " f[2] }
    return median(list)
  }
  function ratio(a, b) { return (a == "" || b == "" || b + 0 == 0) ? "-" : sprintf("%.2f", a / b) }
  function cell(v) { return v == "" ? "-" : v }
  BEGIN {
    w = first_time(wf); m = first_time(mf); g = first_time(gf)
    printf "%12s %11s %11s %11s %9s %9s\n", "size (B)", "weft", "mpi", "gloo", "mpi/weft",
           "gloo/weft"
    printf "%12s %11s %11s %11s %9s %9s\n", 8, cell(w), cell(m), cell(g), ratio(m, w), ratio(g, w)
  }'
if [ "$transport" = tcp ] && [ -n "$limit" ]; then
  echo "one loopback TCP stream (bench/loopback_tcp.py), median of $rounds rounds: $limit GB/s"
fi
echo
log "raw outputs: $build/compare-*.r{1..$rounds}.txt; table: $tsv"
if [ -n "$plot" ]; then /usr/bin/python3 "$root/bench/plot_bench.py" "$tsv" "$plot"; fi
