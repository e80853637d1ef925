#!/usr/bin/env bash
# ctest bench.serialization_round_trip: every format of weft_serialization_bench on the smallest
# sizes and a thousand records, a few milliseconds each; fails (report.py --check) when a round
# trip that must be bit-exact is not, or when JSON seems to carry NaN/Inf.
#   round_trip_test.sh PATH/TO/weft_serialization_bench
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
dir="$(mktemp -d)"
trap 'rm -rf "$dir"' EXIT
"$1" --records=1000 --max-bytes=4096 --benchmark_min_time=0.001 \
  --benchmark_out="$dir/results.json" --benchmark_out_format=json >"$dir/console.txt" 2>&1 ||
  { cat "$dir/console.txt"; exit 1; }
python3 "$here/report.py" "$dir/results.json" --check
echo "round_trip_test.sh: every format round-trips; JSON refuses NaN/Inf"
