#!/usr/bin/env bash
# torch.distributed backend "weft" vs "gloo" on this machine: all_reduce sweep and DDP steps.
#   bench/torch_compare.sh [-n RANKS] [ARGS for bench/torch_compare.py ...]
# Installs what is missing, builds the release preset (module + torch backend), then runs
# bench/torch_compare.py under `weft run`. See bench/torch_compare.py for the columns.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
ranks=2
if [ "${1:-}" = "-n" ]; then ranks="$2"; shift 2; fi
cd "$root"
bash scripts/setup.sh >&2
cmake --preset release >/dev/null
cmake --build build --target weft_tool weft_python_module weft_torch_module >&2
PYTHONPATH="$root/build/python" OMP_NUM_THREADS=1 \
  build/tools/weft run -n "$ranks" -- /usr/bin/python3 bench/torch_compare.py "$@" |
  sed -E 's/^\[0\] //' | grep -v '^\[[0-9]*\]'
