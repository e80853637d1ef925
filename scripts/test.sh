#!/usr/bin/env bash
# The test command: installs what is missing (scripts/setup.sh), builds, and runs every test with
# ctest; then builds the core suites with AddressSanitizer + UndefinedBehaviorSanitizer and runs
# them again. WEFT_SKIP_SANITIZERS=1 skips the second part.
set -euo pipefail
cd "$(dirname "$0")/.."
jobs=$(nproc)

bash scripts/setup.sh
cmake --preset release
cmake --build build -j "$jobs"
ctest --test-dir build --output-on-failure -j 2 --timeout 900

if [ "${WEFT_SKIP_SANITIZERS:-0}" != 1 ]; then
  cmake --preset asan
  cmake --build build-asan -j "$jobs" --target weft_unit_tests weft_multirank_tests
  ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1 \
    ctest --test-dir build-asan --output-on-failure -j 2 -L core --timeout 900
fi
