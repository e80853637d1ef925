#!/usr/bin/env bash
# Installs the build tree as a user would (`cmake --install build --prefix ~/.local`, with HOME a
# temporary folder) and uses every part of it from outside the repository:
#  - a CMake consumer (find_package(weft) + weft::weft, no C++ standard set: the target brings
#    C++20) and a pkg-config consumer (g++ with nothing but pkg-config's flags), built and run,
#    alone and under the installed `weft run`; the same for a C11 program using weft_c.h;
#  - the man pages: one per command that `weft --help` lists, under share/man/man1;
#  - with PYTHON (the interpreter the module was built for; "" when it was not), the Python
#    package: imported from the prefix with no PYTHONPATH, and a 2-rank job under the installed
#    `weft run` (numpy; with TORCH=ON also torch.distributed with backend "weft").
# Usage: install_test.sh BUILD_DIR SOURCE_DIR [PYTHON [TORCH]]
set -euo pipefail
build=$(realpath "$1")
src=$(realpath "$2")
python=${3:-}
torch=${4:-OFF}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
unset PYTHONPATH
export HOME=$work/home
prefix=$HOME/.local
mkdir -p "$HOME"
cmake --install "$build" --prefix "$prefix" >/dev/null
weft=$prefix/bin/weft
test -x "$weft"
test -f "$prefix/include/weft/weft.h"
libdir=$(dirname "$(find "$prefix" -name 'libweft.so.*' | head -n 1)")

# The man pages: weft.1 and weft-CMD.1 for every subcommand the tool lists.
commands=$("$weft" --help | sed -n '/^Subcommands:/,$p' | awk 'NR > 1 && NF { print $1 }')
test -n "$commands"
for page in weft $(printf 'weft-%s ' $commands); do
  f=$prefix/share/man/man1/$page.1
  grep -q '^\.TH ' "$f" || { echo "install test: $f is not a man page" >&2; exit 1; }
done
grep -q 'nranks' "$prefix/share/man/man1/weft-run.1"  # the options, from weft run --help

cmake -S "$src/tests/install/consumer" -B "$work/cmake-build" -G Ninja \
  -DCMAKE_PREFIX_PATH="$prefix" >/dev/null
cmake --build "$work/cmake-build" >/dev/null
LD_LIBRARY_PATH=$libdir "$work/cmake-build/consumer"
LD_LIBRARY_PATH=$libdir "$weft" run -n 2 "$work/cmake-build/consumer"

flags=$(PKG_CONFIG_PATH="$libdir/pkgconfig" pkg-config --cflags --libs weft)
# shellcheck disable=SC2086
g++ -o "$work/pc-consumer" "$src/tests/install/consumer/main.cc" $flags -pthread
LD_LIBRARY_PATH=$libdir "$work/pc-consumer"

# The C API from C11: with CMake, and with gcc and pkg-config's weft-c (the include path and the
# library; weft.pc's Cflags hold -std=c++20, for C++ consumers).
cmake -S "$src/tests/install/c_consumer" -B "$work/c-build" -G Ninja \
  -DCMAKE_PREFIX_PATH="$prefix" >/dev/null
cmake --build "$work/c-build" >/dev/null
LD_LIBRARY_PATH=$libdir "$weft" run -n 2 "$work/c-build/c_consumer"
c_flags=$(PKG_CONFIG_PATH="$libdir/pkgconfig" pkg-config --cflags --libs weft-c)
# shellcheck disable=SC2086
gcc -std=c11 -Wall -Wpedantic -o "$work/pc-c-consumer" "$src/tests/install/c_consumer/main.c" \
  $c_flags
LD_LIBRARY_PATH=$libdir "$weft" run -n 2 "$work/pc-c-consumer"
echo "install test: find_package and pkg-config consumers (C++ and C) passed"

if [ -n "$python" ]; then
  cd "$work"  # nothing of the repository on the path
  where=$("$python" -c 'import weft; print(weft.__file__)')
  case "$where" in
    "$prefix"/*) echo "install test: import weft -> $where" ;;
    *) echo "install test: import weft found $where, not the package under $prefix" >&2; exit 1 ;;
  esac
  "$weft" run -n 2 "$python" "$src/tests/install/python_consumer.py"
  if [ "$torch" = ON ]; then
    "$weft" run -n 2 "$python" "$src/tests/install/python_consumer.py" --torch
  fi
  echo "install test: the Python package works from the prefix"
fi
