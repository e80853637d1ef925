#!/usr/bin/env bash
# Installs the Debian packages weft needs. Idempotent: packages already present are skipped,
# and apt is not touched at all when nothing is missing.
#   scripts/setup.sh           build + test dependencies (incl. the Python module and torch backend)
#   scripts/setup.sh --bench   also the comparison baselines (Open MPI, Gloo)
set -euo pipefail

packages=(
  build-essential cmake ninja-build pkg-config git
  clang  # the thread-safety build (CMake preset thread-safety)
  libclang-rt-dev  # libFuzzer and clang's sanitizer runtimes (CMake preset fuzz)
  libgtest-dev libgmock-dev libbenchmark-dev
  nlohmann-json3-dev libcli11-dev libfmt-dev libspdlog-dev
  libssl-dev  # security/: OpenSSL 3 (X25519, BLAKE2s, ChaCha20-Poly1305, AES-GCM)
  prometheus-cpp-dev libcivetweb-dev  # core/metrics_export.cc: the /metrics endpoint
  prometheus  # tests/observability: a real Prometheus scrapes a job; promtool checks a scrape
  chromium python3-websockets  # tests/observability: the `weft diag --serve` page and socket
  golang-go golang-github-flynn-noise-dev  # the Noise interop test (tests/security/interop)
  iproute2 procps
  python3-matplotlib  # bench/plot_bench.py: the charts of bench/compare.sh --plot (test bench.plot)
  # ps/: the parameter server over gRPC (built only when these are found: WEFT_BUILD_PS)
  libgrpc++-dev protobuf-compiler-grpc  # and libprotobuf-dev protobuf-compiler, below
  libprotobuf-dev protobuf-compiler libflatbuffers-dev flatbuffers-compiler libavro-dev
  libsimdjson-dev rapidjson-dev  # bench/serialization: the formats it compares (issue 23)
  help2man  # the man pages of the `weft` command, made from its --help text
  dpkg-dev fakeroot  # cpack -G DEB: dpkg-shlibdeps for the packages' dependencies
  python3 python3-dev pybind11-dev python3-numpy python3-torch libtorch-dev
)
for arg in "$@"; do
  case "$arg" in
    --bench) packages+=(openmpi-bin libopenmpi-dev libgloo-dev python3) ;;
    *) echo "setup.sh: unknown option '$arg' (known: --bench)" >&2; exit 2 ;;
  esac
done

missing=()
for p in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done
if [ ${#missing[@]} -eq 0 ]; then
  echo "setup.sh: all ${#packages[@]} packages present"
  exit 0
fi

sudo=""
if [ "$(id -u)" -ne 0 ]; then sudo="sudo"; fi
echo "setup.sh: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
$sudo apt-get update -qq
$sudo apt-get install -y -qq --no-install-recommends "${missing[@]}"
