#!/usr/bin/env bash
# The test command: installs what is missing (scripts/setup.sh), builds, compiles the library and
# tools with clang's thread-safety analysis (preset thread-safety: any locking-rule warning fails
# the build), runs the core suites under AddressSanitizer + UndefinedBehaviorSanitizer, then every
# test of the release build with ctest (whose summary closes the output). Between the two, the
# security fuzz targets (preset fuzz: clang, libFuzzer, ASan+UBSan; they need only the base and
# security layers) each run for WEFT_FUZZ_SECONDS (default 30).
# WEFT_SKIP_THREAD_SAFETY=1 skips the thread-safety build, WEFT_SKIP_SANITIZERS=1 the sanitizer
# part, WEFT_SKIP_FUZZ=1 the fuzzing.
set -euo pipefail
cd "$(dirname "$0")/.."
jobs=$(nproc)

bash scripts/setup.sh
cmake --preset release
cmake --build build -j "$jobs"

if [ "${WEFT_SKIP_THREAD_SAFETY:-0}" != 1 ]; then
  echo "== thread-safety analysis (clang)"
  cmake --preset thread-safety
  cmake --build build-tsa -j "$jobs"
fi

if [ "${WEFT_SKIP_SANITIZERS:-0}" != 1 ]; then
  cmake --preset asan
  asan_tests=(weft_unit_tests weft_multirank_tests weft_security_tests)
  # The parameter server's tests, when gRPC is installed (WEFT_BUILD_PS).
  if grep -q '^WEFT_BUILD_PS:BOOL=ON' build-asan/CMakeCache.txt; then asan_tests+=(weft_ps_tests); fi
  cmake --build build-asan -j "$jobs" --target "${asan_tests[@]}"
  # One process per binary (ctest would start one per test case, slow under ASan).
  export ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1
  for t in "${asan_tests[@]}"; do
    echo "== $t (ASan+UBSan)"
    build-asan/tests/$t --gtest_brief=1
  done
  unset ASAN_OPTIONS UBSAN_OPTIONS
fi

if [ "${WEFT_SKIP_FUZZ:-0}" != 1 ]; then
  fuzzers=(security_handshake_fuzz security_record_fuzz)
  cmake --preset fuzz
  cmake --build build-fuzz -j "$jobs" --target "${fuzzers[@]}"
  for f in "${fuzzers[@]}"; do
    echo "== $f (${WEFT_FUZZ_SECONDS:-30} s)"
    if ! build-fuzz/tests/fuzz/$f -max_total_time="${WEFT_FUZZ_SECONDS:-30}" -max_len=8192 \
        -print_final_stats=1 >"build-fuzz/$f.log" 2>&1; then
      tail -n 60 "build-fuzz/$f.log"
      exit 1
    fi
    tail -n 6 "build-fuzz/$f.log"
  done
fi

ctest --test-dir build --output-on-failure -j 2 --timeout 900
