#!/usr/bin/env bash
# What security costs on a real link (issue 21): allreduce (f32 sum) between two hosts joined by
# one 1 gbit link (tests/netns/netns.sh's `pair`: two network namespaces, a veth pair capped by
# tc tbf both ways), one rank per host, with WEFT_SECURITY=off, auth and encrypt interleaved
# run by run (the order rotates each round), ROUNDS rounds (three times as many for 8 bytes).
# Prints the median bus bandwidth from 1 MiB to 64 MiB and the median 8-byte latency of each
# mode, their range over the rounds, encrypt/off and auth/off, and the load average. The
# targets: encrypted busbw >= 95% of plaintext from 1 MiB, 8-byte latency at most 2 us above
# plaintext.
#
#   bench/netns_security_bench.sh [WEFT] [ROUNDS]
#
# WEFT is a `weft` binary (default build/tools/weft; a Release build); ROUNDS defaults to 5. Needs
# root. The key is the one `weft run` makes for its ranks. Rows are kept in $BENCH_OUT (default:
# a temporary folder). NETNS_MBIT changes the link's cap (default 1000).
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
weft=$(realpath "${1:-$here/build/tools/weft}")
rounds=${2:-5}
netns="$here/tests/netns/netns.sh"
out=${BENCH_OUT:-$(mktemp -d)}
mkdir -p "$out"
rows=$out/rows.txt
: >"$rows"
[ -x "$weft" ] || { echo "no weft binary at $weft" >&2; exit 2; }
name=wsb$$
trap '"$netns" down "$name"' EXIT
trap 'exit 130' INT TERM
"$netns" up pair "$name" >"$out/network.txt"
[ "${NETNS_MBIT:-1000}" = 1000 ] || "$netns" rate "$name" link "$NETNS_MBIT"

load_before=$(cut -d' ' -f1-3 /proc/loadavg)
run() {  # mode bench-args...: one job, its rank-0 rows appended as "mode size time busbw"
  local mode=$1
  shift
  WEFT_SECURITY=$mode "$netns" run "$name" --weft "$weft" --timeout 600 -- \
    "$weft" bench allreduce "$@" >"$out/last.txt" 2>&1 || { cat "$out/last.txt" >&2; exit 1; }
  grep -E '^\[0\] +[0-9]' "$out/last.txt" | awk -v m="$mode" '{print m, $2, $7, $9}' >>"$rows"
}
modes=(off auth encrypt)
rounds_of() {  # ROUNDS WHAT bench-args...: interleaved rounds, the order rotating each round
  local n=$1 what=$2 r k
  shift 2
  for r in $(seq 1 "$n"); do
    echo "netns_security_bench.sh: $what round $r of $n (load $(cut -d' ' -f1 /proc/loadavg))" >&2
    for k in 0 1 2; do run "${modes[$(((r + k) % 3))]}" "$@"; done
  done
}
# Latency first, in three times the rounds (a job takes under a second): a moment of other work
# on the CPUs costs a latency run most, so more of them make its median steadier.
rounds_of $((rounds * 3)) latency -b 8 -e 8 -n 3000 -w 300
load_middle=$(cut -d' ' -f1-3 /proc/loadavg)
rounds_of "$rounds" bandwidth -b 1M -e 64M -f 4 -n 5 -w 1
load_after=$(cut -d' ' -f1-3 /proc/loadavg)

echo "# allreduce f32 sum, 2 ranks, one per namespace, ${NETNS_MBIT:-1000} mbit link (tbf);" \
  "medians of $rounds interleaved rounds (8 bytes: $((rounds * 3)))"
echo "# weft: $weft; load average before: $load_before, after the latency rounds:" \
  "$load_middle, at the end: $load_after"
python3 - "$rows" <<'PY'
import collections, statistics, sys
# busbw from the time (weft bench prints it to 3 decimals): size / time x 2(N-1)/N, N = 2.
d = collections.defaultdict(list)
for line in open(sys.argv[1]):
    mode, size, t, _ = line.split()
    d[(int(size), mode)].append((float(t), int(size) / float(t) / 1e3))
modes = ("off", "auth", "encrypt")
def cell(v, i, fmt):
    xs = [x[i] for x in v]
    return f"{statistics.median(xs):{fmt}} [{min(xs):{fmt}}-{max(xs):{fmt}}]"
print(f"{'size (B)':>10} | " + " | ".join(f"{m + ' busbw GB/s [range]':>24}" for m in modes) +
      " | encrypt/off | auth/off")
for size in sorted({s for s, _ in d if s > 8}):
    med = {m: statistics.median(x[1] for x in d[(size, m)]) for m in modes}
    print(f"{size:>10} | " + " | ".join(f"{cell(d[(size, m)], 1, '.4f'):>24}" for m in modes) +
          f" | {med['encrypt'] / med['off']:11.3f} | {med['auth'] / med['off']:8.3f}")
if (8, "off") in d:
    med = {m: statistics.median(x[0] for x in d[(8, m)]) for m in modes}
    print(f"{'8 B (us)':>10} | " + " | ".join(f"{cell(d[(8, m)], 0, '.2f'):>24}" for m in modes) +
          f" | encrypt-off {med['encrypt'] - med['off']:+.2f} us, auth-off "
          f"{med['auth'] - med['off']:+.2f} us")
    # Other work on the CPUs adds whole scheduler delays to some rounds: the fastest round of
    # each mode is the closer estimate of what the mode itself costs.
    low = {m: min(x[0] for x in d[(8, m)]) for m in modes}
    print(f"{'':>10}   fastest rounds: encrypt-off {low['encrypt'] - low['off']:+.2f} us, "
          f"auth-off {low['auth'] - low['off']:+.2f} us")
PY
echo "# rows: $rows"
