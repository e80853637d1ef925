#!/usr/bin/env bash
# Before/after comparison of two builds of weft on this machine: allreduce (f32, sum) latency at
# 8 bytes and time/bus bandwidth from 1 MiB to 64 MiB, over TCP with 2 ranks and shared memory
# with 2 and 4 ranks, the two builds interleaved run by run (before, after, before, ...), ROUNDS
# rounds; prints the median time of each side, its range and after/before. For changes that must
# not move performance (a refactor): compare the ratio with the spread of the before runs.
# TCP links run plaintext (WEFT_SECURITY=off) on both sides, so builds from before the security
# layer compare like with like.
#
#   bench/ab_compare.sh BEFORE_WEFT AFTER_WEFT [ROUNDS]
#
# BEFORE_WEFT and AFTER_WEFT are `weft` binaries (tools/weft of two Release builds, e.g. one of a
# `git worktree` at the old commit). Rows are kept in $AB_OUT (default: a temporary folder).
set -euo pipefail
if [ $# -lt 2 ]; then sed -n '2,13p' "$0" | sed 's/^# \{0,1\}//'; exit 2; fi
before=$1 after=$2 rounds=${3:-15}
out=${AB_OUT:-$(mktemp -d)}
mkdir -p "$out"
rows=$out/rows.txt
: >"$rows"
# "WEFT_SECURITY=off" for a build that knows the variable (builds before it refuse it).
plaintext_env() {
  if WEFT_SECURITY=off "$1" run -n 1 -- "$1" bench allreduce -b 8 -e 8 -n 1 -w 0 >/dev/null 2>&1
  then echo WEFT_SECURITY=off; fi
}
before_env=$(plaintext_env "$before") after_env=$(plaintext_env "$after")
run() {  # tag binary transport ranks bench-args...
  local tag=$1 exe=$2 tr=$3 n=$4 extra=$before_env
  shift 4
  [ "$exe" = "$after" ] && extra=$after_env
  env $extra WEFT_TRANSPORT=$tr "$exe" run -n "$n" -- "$exe" bench allreduce "$@" 2>/dev/null |
    grep -E '^\[0\] +[0-9]' | awk -v t="$tag" '{print t, $2, $7, $9}' >>"$rows"
}
for r in $(seq 1 "$rounds"); do
  echo "ab_compare.sh: round $r of $rounds" >&2
  for cfg in "tcp 2" "shm 2" "shm 4"; do
    set -- $cfg
    for side in before after; do
      exe=$before
      [ "$side" = after ] && exe=$after
      run "$side $1 $2" "$exe" "$1" "$2" -b 8 -e 8 -n 3000 -w 300
      run "$side $1 $2" "$exe" "$1" "$2" -b 1M -e 64M -f 8 -n 10 -w 3
    done
  done
done
python3 - "$rows" <<'PY'
import collections, statistics, sys
d = collections.defaultdict(list)
for line in open(sys.argv[1]):
    side, tr, n, size, t, bw = line.split()
    d[(tr, int(n), int(size), side)].append((float(t), float(bw)))
print(f"{'transport':>9} {'ranks':>5} {'size (B)':>10} | {'before us (GB/s) [range]':>36} | "
      f"{'after us (GB/s) [range]':>36} | after/before")
for tr, n, size in sorted({k[:3] for k in d}):
    cells = []
    for side in ("before", "after"):
        v = d[(tr, n, size, side)]
        t = statistics.median(x[0] for x in v)
        bw = statistics.median(x[1] for x in v)
        cells.append((t, f"{t:10.2f} ({bw:6.3f}) [{min(x[0] for x in v):.2f}-{max(x[0] for x in v):.2f}]"))
    print(f"{tr:>9} {n:>5} {size:>10} | {cells[0][1]:>36} | {cells[1][1]:>36} | "
          f"{cells[1][0] / cells[0][0]:.3f}")
PY
