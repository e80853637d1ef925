#!/usr/bin/env bash
# The test command: installs what is missing (scripts/setup.sh), builds, runs the core suites
# under AddressSanitizer + UndefinedBehaviorSanitizer, then every test of the release build with
# ctest (whose summary closes the output). WEFT_SKIP_SANITIZERS=1 skips the sanitizer part.
set -euo pipefail
cd "$(dirname "$0")/.."
jobs=$(nproc)

bash scripts/setup.sh
cmake --preset release
cmake --build build -j "$jobs"

if [ "${WEFT_SKIP_SANITIZERS:-0}" != 1 ]; then
  cmake --preset asan
  cmake --build build-asan -j "$jobs" --target weft_unit_tests weft_multirank_tests
  # One process per binary (ctest would start one per test case, slow under ASan).
  export ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1
  for t in weft_unit_tests weft_multirank_tests; do
    echo "== $t (ASan+UBSan)"
    build-asan/tests/$t --gtest_brief=1
  done
  unset ASAN_OPTIONS UBSAN_OPTIONS
fi

ctest --test-dir build --output-on-failure -j 2 --timeout 900
