#!/usr/bin/env bash
# The main job: installs what is missing, builds, and trains a small model data-parallel on 4
# local ranks, averaging gradients with weft's allreduce. Extra arguments go to the demo
# (e.g. scripts/demo.sh --steps 400).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
cmake --preset release >/dev/null
cmake --build build -j "$(nproc)" --target weft_tool weft_train_demo
exec ./build/tools/weft run -n "${WEFT_DEMO_RANKS:-4}" ./build/examples/weft_train_demo "$@"
