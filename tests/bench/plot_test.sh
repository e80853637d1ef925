#!/usr/bin/env bash
# bench/plot_bench.py draws a table in the format bench/compare.sh writes: a PNG of sensible size
# comes out, and a file without a table is a clear error (exit 1), not a traceback. Exit 77
# (skipped) without matplotlib.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
if ! /usr/bin/python3 -c 'import matplotlib' 2>/dev/null; then
  echo "plot_test.sh: matplotlib is not installed (scripts/setup.sh installs python3-matplotlib)"
  exit 77
fi
dir="$(mktemp -d)"
trap 'rm -rf "$dir"' EXIT
printf '%s\n' '# title: allreduce f32 sum, 2 ranks, test' '# limit: single-thread memcpy, 64 MiB=8.8' \
  "$(printf 'size\tweft busbw\tweft us\tmpi busbw\tmpi us\tgloo busbw\tgloo us')" \
  "$(printf '16\t0.055\t0.29\t0.05\t0.3\t-\t-')" \
  "$(printf '1048576\t9.6\t108\t6.6\t158\t0.66\t1580')" \
  "$(printf '67108864\t3.2\t21000\t1.4\t49000\t1.05\t63000')" >"$dir/table.tsv"
/usr/bin/python3 "$root/bench/plot_bench.py" "$dir/table.tsv" "$dir/out.png"
# A PNG: its 8-byte signature, and more than an empty canvas's few kilobytes.
[ "$(head -c 8 "$dir/out.png" | od -An -tx1 | tr -d ' \n')" = 89504e470d0a1a0a ] ||
  { echo "plot_test.sh: out.png is not a PNG"; exit 1; }
size=$(stat -c %s "$dir/out.png")
[ "$size" -gt 20000 ] || { echo "plot_test.sh: out.png has only $size bytes"; exit 1; }
echo "# nothing" >"$dir/empty.tsv"
if /usr/bin/python3 "$root/bench/plot_bench.py" "$dir/empty.tsv" "$dir/x.png" 2>"$dir/err"; then
  echo "plot_test.sh: a file without a table was accepted"; exit 1
fi
grep -q "holds no table" "$dir/err" || { echo "plot_test.sh: unclear error:"; cat "$dir/err"; exit 1; }
[ ! -e "$dir/x.png" ] || { echo "plot_test.sh: wrote a plot of nothing"; exit 1; }
echo "plot_test.sh: ok ($size bytes)"
