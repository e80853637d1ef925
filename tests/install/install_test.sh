#!/usr/bin/env bash
# Installs the build tree into a temporary prefix, then builds and runs a consumer program with
# find_package(weft) and another with pkg-config. Usage: install_test.sh BUILD_DIR SOURCE_DIR
set -euo pipefail
build=$1
src=$2
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cmake --install "$build" --prefix "$work/prefix" >/dev/null
test -x "$work/prefix/bin/weft"
test -f "$work/prefix/include/weft/weft.h"

cmake -S "$src/tests/install/consumer" -B "$work/cmake-build" -G Ninja \
  -DCMAKE_PREFIX_PATH="$work/prefix" >/dev/null
cmake --build "$work/cmake-build" >/dev/null
LD_LIBRARY_PATH="$work/prefix/lib:$work/prefix/lib/x86_64-linux-gnu" "$work/cmake-build/consumer"

pc_dir=$(dirname "$(find "$work/prefix" -name weft.pc | head -n 1)")
flags=$(PKG_CONFIG_PATH="$pc_dir" pkg-config --cflags --libs weft)
# shellcheck disable=SC2086
g++ -o "$work/pc-consumer" "$src/tests/install/consumer/main.cc" $flags -pthread
LD_LIBRARY_PATH="$work/prefix/lib:$work/prefix/lib/x86_64-linux-gnu" "$work/pc-consumer"
echo "install test: find_package and pkg-config consumers passed"
