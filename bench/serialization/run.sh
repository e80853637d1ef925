#!/usr/bin/env bash
# The serialization benchmark of issue 23 (README "Serialization benchmark"): builds
# weft_serialization_bench in a Release build directory, runs it (about a minute on 2 cores),
# prints the markdown tables (bench/serialization/report.py) and, with --plot, draws the chart.
#
#   bench/serialization/run.sh [--build-dir DIR] [--no-build] [--min-time SECONDS]
#                              [--plot FILE.png] [-- BENCHMARK FLAGS...]
#
# The raw results stay in the build directory (serialization.json). Figures are MB/s (10^6 bytes)
# of the encoded form per CPU second, one thread; they vary with load, so compare within one run.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
build="$root/build-serialization" build_it=1 min_time=0.1 plot=""
usage() { sed -n '2,10p' "$0" | sed 's/^# \{0,1\}//'; exit "${1:-0}"; }
while [ $# -gt 0 ]; do
  case "$1" in
    --build-dir) build="$2"; shift 2 ;;
    --no-build) build_it=0; shift ;;
    --min-time) min_time="$2"; shift 2 ;;
    --plot) plot="$2"; shift 2 ;;
    --) shift; break ;;
    -h|--help) usage 0 ;;
    *) echo "run.sh: unknown option '$1'" >&2; usage 2 ;;
  esac
done
log() { echo "run.sh [$(date +%H:%M:%S)]: $*" >&2; }

if [ "$build_it" = 1 ]; then
  log "building in $build"
  cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DWEFT_BUILD_TESTS=OFF \
    -DWEFT_BUILD_BENCH=ON -DWEFT_BUILD_PYTHON=OFF -DWEFT_BUILD_TORCH=OFF \
    >"$build.configure.log" 2>&1 || { cat "$build.configure.log" >&2; exit 1; }
  cmake --build "$build" --parallel "$(nproc)" --target weft_serialization_bench >&2
fi
bench="$build/bench/serialization/weft_serialization_bench"
if [ ! -x "$bench" ]; then
  echo "run.sh: $bench is not built (a library missing? scripts/setup.sh)" >&2
  exit 1
fi

log "running $bench (load: $(cut -d' ' -f1-3 /proc/loadavg))"
"$bench" --benchmark_min_time="$min_time" --benchmark_out="$build/serialization.json" \
  --benchmark_out_format=json "$@" >"$build/serialization.txt"
echo "bench/serialization/run.sh, $(date -u '+%Y-%m-%d %H:%M UTC'), $(nproc) CPUs, load after:" \
  "$(cut -d' ' -f1-3 /proc/loadavg)"
echo
args=("$build/serialization.json")
if [ -n "$plot" ]; then args+=(--plot "$plot"); fi
/usr/bin/python3 "$root/bench/serialization/report.py" "${args[@]}"
