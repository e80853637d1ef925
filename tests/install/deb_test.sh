#!/usr/bin/env bash
# The Debian packages of the build, as a user gets them: `cpack -G DEB`, then `apt-get install
# ./*.deb` on this machine, then, with nothing of the build tree on any path:
#  - a CMake consumer (find_package(weft) finds /usr's package) and a pkg-config consumer, built,
#    run alone and as a 2-rank `weft run` job;
#  - `weft --version` and `man` pages from the packages;
#  - with PYTHON (the module was built; TORCH=ON: the torch backend too): the numpy module in a
#    `weft run` job and a torchrun job with backend="weft", importing weft from dist-packages.
# Then the packages are purged, with whatever apt installed for them, and the machine is checked
# to hold the same packages as before and no weft files; this also happens when a step fails.
# Skipped (exit 77) when not root or without apt/dpkg, and when weft packages are installed
# already (it will not touch a real installation).
# Usage: deb_test.sh BUILD_DIR SOURCE_DIR [PYTHON [TORCH]]
set -euo pipefail
build=$(realpath "$1")
src=$(realpath "$2")
python=${3:-}
torch=${4:-OFF}
packages=(libweft0 libweft-dev weft python3-weft)

skip() {
  echo "deb test skipped: $*"
  exit 77
}
[ "$(id -u)" -eq 0 ] || skip "not root (it installs packages with apt-get)"
for tool in apt-get dpkg dpkg-query dpkg-shlibdeps cpack; do
  command -v "$tool" >/dev/null || skip "$tool is not available"
done
installed() { dpkg-query -W -f='${db:Status-Abbrev} ${Package}\n' 2>/dev/null | awk '$1 == "ii" { print $2 }' | sort; }
for p in "${packages[@]}"; do
  if installed | grep -qx "$p"; then skip "$p is installed on this machine already"; fi
done
for f in /usr/bin/weft /usr/include/weft /usr/lib/python3/dist-packages/weft; do
  if [ -e "$f" ]; then skip "$f exists already"; fi
done

work=$(mktemp -d)
installed >"$work/before"
cleanup() {
  local rc=$?
  trap - EXIT INT TERM
  installed >"$work/after"
  mapfile -t added < <(comm -13 "$work/before" "$work/after")
  if [ ${#added[@]} -gt 0 ]; then
    echo "deb test: purging ${added[*]}"
    DEBIAN_FRONTEND=noninteractive apt-get purge -y -qq "${added[@]}" >"$work/purge.log" 2>&1 ||
      { cat "$work/purge.log"; rc=1; }
  fi
  installed >"$work/after"
  if ! cmp -s "$work/before" "$work/after"; then
    echo "deb test: the installed packages differ from before:" >&2
    diff "$work/before" "$work/after" >&2 || true
    rc=1
  fi
  for left in /usr/bin/weft /usr/include/weft /usr/lib/python3/dist-packages/weft \
      /usr/share/man/man1/weft.1; do
    if [ -e "$left" ]; then echo "deb test: $left is left behind" >&2; rc=1; fi
  done
  rm -rf "$work"
  exit $rc
}
trap cleanup EXIT
trap 'exit 130' INT TERM
unset PYTHONPATH LD_LIBRARY_PATH PKG_CONFIG_PATH CMAKE_PREFIX_PATH

cpack --config "$build/CPackConfig.cmake" -G DEB -B "$work/debs" >"$work/cpack.log" 2>&1 ||
  { cat "$work/cpack.log"; exit 1; }
debs=("$work"/debs/*.deb)
for d in "${debs[@]}"; do
  echo "deb test: $(basename "$d"): $(dpkg-deb -f "$d" Depends)"
done
DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${debs[@]}" \
  >"$work/install.log" 2>&1 || { cat "$work/install.log"; exit 1; }
cd "$work"  # nothing of the repository on the path

/usr/bin/weft --version | sed -n 1,2p
test -f /usr/share/man/man1/weft-run.1

cmake -S "$src/tests/install/consumer" -B "$work/cmake-build" -G Ninja >/dev/null
weft_dir=$(sed -n 's/^weft_DIR:PATH=//p' "$work/cmake-build/CMakeCache.txt")
case "$weft_dir" in
  /usr/lib/*) ;;
  *) echo "deb test: find_package(weft) found $weft_dir, not the package's" >&2; exit 1 ;;
esac
cmake --build "$work/cmake-build" >/dev/null
"$work/cmake-build/consumer"
/usr/bin/weft run -n 2 "$work/cmake-build/consumer"
# shellcheck disable=SC2046
g++ -o "$work/pc-consumer" "$src/tests/install/consumer/main.cc" $(pkg-config --cflags --libs weft) -pthread
"$work/pc-consumer"

if [ -n "$python" ]; then
  /usr/bin/weft run -n 2 "$python" "$src/tests/install/python_consumer.py" | tee "$work/numpy.log"
  grep -q "from /usr/lib/python3/dist-packages/weft/" "$work/numpy.log"
  if [ "$torch" = ON ]; then
    "$python" -m torch.distributed.run --standalone --nproc_per_node 2 --redirects 1 --tee 1 \
      "$src/tests/install/python_consumer.py" --torch 2>&1 | tee "$work/torch.log"
    [ "$(grep -c "torch allreduce ok" "$work/torch.log")" -eq 2 ]
  fi
fi
echo "deb test: the packages install, work and remove cleanly"
