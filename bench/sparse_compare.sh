#!/usr/bin/env bash
# Sparse all_reduce of an embedding gradient: weft vs gloo vs weft's dense allreduce of the same
# table, and the crossover between weft's two sparse algorithms.
#   bench/sparse_compare.sh [-n RANKS] [--no-setup] [ARGS for bench/sparse_compare.py ...]
# Installs what is missing, builds the release preset (module + torch backend), then runs
# bench/sparse_compare.py under `weft run`. See bench/sparse_compare.py for the columns.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
ranks=2
setup=1
while [ $# -gt 0 ]; do
  case "$1" in
    -n) ranks="$2"; shift 2 ;;
    --no-setup) setup=0; shift ;;
    *) break ;;
  esac
done
cd "$root"
if [ "$setup" = 1 ]; then
  bash scripts/setup.sh >&2
  cmake --preset release >/dev/null
  cmake --build build --target weft_tool weft_python_module weft_torch_module >&2
fi
PYTHONPATH="$root/build/python" OMP_NUM_THREADS=1 \
  build/tools/weft run -n "$ranks" -- /usr/bin/python3 bench/sparse_compare.py "$@" |
  sed -E 's/^\[0\] //' | grep -v '^\[[0-9]*\]'
