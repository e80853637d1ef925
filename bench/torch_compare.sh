#!/usr/bin/env bash
# torch.distributed backend "weft" vs "gloo" on this machine: all_reduce sweep and DDP steps.
#   bench/torch_compare.sh [-n RANKS] [--no-setup] [--plot FILE.png] [--script PY] [ARGS ...]
# Installs what is missing, builds the release preset (module + torch backend), then runs
# bench/torch_compare.py (or PY, e.g. bench/sparse_compare.py) under `weft run`. See the
# script for the columns. --no-setup skips the installation and the build. --plot draws the
# all_reduce table (busbw and time per call against size, both backends, a single-thread copy
# as the limit line; bench/plot_bench.py, matplotlib).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
ranks=2
setup=1
plot=""
script=bench/torch_compare.py
while [ $# -gt 0 ]; do
  case "$1" in
    -n) ranks="$2"; shift 2 ;;
    --no-setup) setup=0; shift ;;
    --plot) plot="$(realpath -m "$2")"; shift 2 ;;
    --script) script="$2"; shift 2 ;;
    *) break ;;
  esac
done
cd "$root"
if [ "$setup" = 1 ]; then
  bash scripts/setup.sh >&2
  cmake --preset release >/dev/null
  cmake --build build --target weft_tool weft_python_module weft_torch_module >&2
fi
extra=()
if [ -n "$plot" ]; then
  if [ "$script" != bench/torch_compare.py ]; then
    echo "torch_compare.sh: --plot draws bench/torch_compare.py's table only" >&2; exit 2
  fi
  tsv="$root/build/torch-compare-table.tsv"
  extra=(--tsv "$tsv")
fi
PYTHONPATH="$root/build/python" OMP_NUM_THREADS=1 \
  build/tools/weft run -n "$ranks" -- /usr/bin/python3 "$script" "$@" "${extra[@]}" |
  sed -E 's/^\[0\] //' | grep -v '^\[[0-9]*\]'
if [ -n "$plot" ]; then /usr/bin/python3 bench/plot_bench.py "$tsv" "$plot"; fi
