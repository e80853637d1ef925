#!/bin/bash
# netns.sh: test networks on one machine, one network namespace per host, joined by veth pairs
# and bridges, each link capped by `tc tbf` in both directions. The C++ test library
# (tests/netns/network.h) drives this script, so tests and people build the same networks.
# Needs root and iproute2. Everything lives in namespaces named NAME.<node>: the machine's own
# interfaces are never touched. tests/netns/README.md has the topologies and examples.
#
#   netns.sh up TOPOLOGY NAME        build pair | two_racks | rails | zones (replacing NAME)
#   netns.sh down NAME               kill what runs inside NAME's namespaces, delete them
#   netns.sh show NAME               "host H NAMESPACE GROUP ADDR..." and
#                                    "link L NS_A IF_A NS_B IF_B MBIT" lines
#   netns.sh list                    the networks that exist
#   netns.sh exec NAME HOST CMD...   run CMD in HOST's namespace
#   netns.sh link NAME LINK up|down  restore or cut a link (both ends)
#   netns.sh rate NAME LINK MBIT     change a link's cap (both directions)
#   netns.sh run NAME [--hosts h0,h1] [--per-host K] [--weft PATH] [--timeout S] [--]
#                PROGRAM ARGS...     a weft job, K ranks per host (see below)
#   netns.sh guard NAME              read stdin to its end, then `down NAME` (the C++ library
#                                    keeps the other end open while a network lives, so the
#                                    network goes even when the test is killed)
#
# `run` starts `weft run` with one host id per namespace, and each rank enters its host's
# namespace (`ip netns exec`). The launcher's own store listens on loopback outside the
# namespaces, so rank 0 hosts the job's store instead (WEFT_HOST_STORE=1) on its first address,
# which every rank gets as WEFT_STORE_ADDR; the job key weft run makes is a file every namespace
# can read.
set -u

STATE=/run/weft-netns
self=$(realpath "$0")
TBF_LATENCY=${NETNS_TBF_LATENCY:-50ms}  # the longest a packet may queue at a cap

die() { echo "netns.sh: $*" >&2; exit 1; }
quiet() { "$@" >/dev/null 2>&1; }

check_name() {
  [[ $1 =~ ^[A-Za-z0-9_-]{1,40}$ ]] || die "bad network name '$1' (letters, digits, - and _)"
}

# tbf at MBIT on the egress of IF in namespace NS. Its burst holds 2 ms at that rate (at least
# 64 KiB, so a whole GSO packet passes).
cap() {
  local ns=$1 ifname=$2 mbit=$3
  local burst=$((mbit * 250))
  ((burst < 65536)) && burst=65536
  ip -n "$ns" link set "$ifname" up &&
    tc -n "$ns" qdisc replace dev "$ifname" root tbf rate "${mbit}mbit" burst "$burst" \
      latency "$TBF_LATENCY"
}

add_node() {  # add_node NAME NODE: an empty namespace with loopback up
  ip netns add "$1.$2" && ip -n "$1.$2" link set lo up
}

add_switch() {  # add_switch NAME SW: a namespace holding the bridge br0
  add_node "$1" "$2" && ip -n "$1.$2" link add br0 type bridge &&
    ip -n "$1.$2" link set br0 up
}

# add_link NAME LINK NODE_A IF_A NODE_B IF_B MBIT: a veth pair made inside the two namespaces (its
# names never exist outside them), capped at both ends; an end in a switch joins its bridge.
add_link() {
  local name=$1 l=$2 a="$1.$3" ia=$4 b="$1.$5" ib=$6 mbit=$7
  ip -n "$a" link add "$ia" type veth peer name "$ib" netns "$b" || return 1
  local ns ifname ns_if
  for ns_if in "$a:$ia" "$b:$ib"; do
    ns=${ns_if%%:*} ifname=${ns_if#*:}
    if quiet ip -n "$ns" link show br0; then ip -n "$ns" link set "$ifname" master br0 || return 1; fi
    cap "$ns" "$ifname" "$mbit" || return 1
  done
  echo "link $l $a $ia $b $ib $mbit" >>"$STATE/$name/links"
}

add_host() {  # add_host NAME HOST GROUP: a host namespace, recorded; addresses come with add_addr
  add_node "$1" "$2" && echo "host $2 $1.$2 $3" >>"$STATE/$1/hosts"
}

add_addr() {  # add_addr NAME HOST IF CIDR
  ip -n "$1.$2" addr add "$4" dev "$3" || return 1
  sed -i "s|^host $2 .*|& ${4%/*}|" "$STATE/$1/hosts"
}

# (a) two hosts on one 1 gbit link.
build_pair() {
  local n=$1
  add_host "$n" h0 - && add_host "$n" h1 - &&
    add_link "$n" link h0 eth0 h1 eth0 1000 &&
    add_addr "$n" h0 eth0 10.77.0.1/24 && add_addr "$n" h1 eth0 10.77.0.2/24
}

# (b) four hosts in two racks: h0 h1 on switch ra, h2 h3 on switch rb, 1 gbit host links, a
# 200 mbit uplink between the switches; one subnet.
build_two_racks() {
  local n=$1 i sw
  add_switch "$n" ra && add_switch "$n" rb || return 1
  for i in 0 1 2 3; do
    sw=ra && ((i >= 2)) && sw=rb
    add_host "$n" "h$i" "rack-$sw" && add_link "$n" "h$i" "h$i" eth0 "$sw" "h$i" 1000 &&
      add_addr "$n" "h$i" eth0 "10.77.0.$((i + 1))/24" || return 1
  done
  add_link "$n" uplink ra uplink rb uplink 200
}

# (c) two hosts joined by two parallel 500 mbit links ("rails"), one subnet each.
build_rails() {
  local n=$1 r
  add_host "$n" h0 - && add_host "$n" h1 - || return 1
  for r in 0 1; do
    add_link "$n" "rail$r" h0 "rail$r" h1 "rail$r" 500 &&
      add_addr "$n" h0 "rail$r" "10.77.$((r + 1)).1/24" &&
      add_addr "$n" h1 "rail$r" "10.77.$((r + 1)).2/24" || return 1
  done
}

# (d) three zones of two hosts (h0 h1 in z0, h2 h3 in z1, h4 h5 in z2), 1 gbit host links,
# zone switches in a line: z0-z1 at 1 gbit, z1-z2 the slow link at 100 mbit; one subnet.
build_zones() {
  local n=$1 i z
  for z in 0 1 2; do add_switch "$n" "z$z" || return 1; done
  for i in 0 1 2 3 4 5; do
    z=z$((i / 2))
    add_host "$n" "h$i" "zone-$z" && add_link "$n" "h$i" "h$i" eth0 "$z" "h$i" 1000 &&
      add_addr "$n" "h$i" eth0 "10.77.0.$((i + 1))/24" || return 1
  done
  add_link "$n" z0-z1 z0 z1 z1 z0 1000 && add_link "$n" z1-z2 z1 z2 z2 z1 100
}

namespaces() {  # the namespaces of network $1
  ip netns list | awk '{print $1}' | grep -F -- "$1." | while read -r ns; do
    [[ $ns == "$1".* ]] && echo "$ns"
  done
}

down() {
  local ns pids
  for ns in $(namespaces "$1"); do
    pids=$(ip netns pids "$ns" 2>/dev/null)
    [ -n "$pids" ] && quiet kill -KILL $pids
    ip netns del "$ns" 2>/dev/null
  done
  rm -rf "${STATE:?}/$1"
}

show() {
  [ -f "$STATE/$1/hosts" ] || die "no network '$1' (netns.sh list)"
  cat "$STATE/$1/hosts" "$STATE/$1/links"
}

field() {  # field NAME KIND KEY N: field N of the "KIND KEY ..." line
  awk -v k="$2" -v key="$3" -v n="$4" '$1 == k && $2 == key {print $n}' "$STATE/$1/$2s"
}

link_ends() {  # link_ends NAME LINK: "NS IF" twice
  local ends
  ends=$(awk -v l="$2" '$2 == l {print $3, $4; print $5, $6}' "$STATE/$1/links" 2>/dev/null)
  [ -n "$ends" ] || die "network '$1' has no link '$2'"
  echo "$ends"
}

# run NAME [options] [--] PROGRAM ARGS...
run_job() {
  local name=$1 hosts="" per_host=1 weft=${NETNS_WEFT:-weft} timeout=0
  shift
  while [ $# -gt 0 ]; do
    case $1 in
      --hosts) hosts=$2; shift 2 ;;
      --per-host) per_host=$2; shift 2 ;;
      --weft) weft=$2; shift 2 ;;
      --timeout) timeout=$2; shift 2 ;;
      --) shift; break ;;
      *) break ;;
    esac
  done
  [ $# -gt 0 ] || die "run: no program"
  [ -f "$STATE/$name/hosts" ] || die "no network '$name' (netns.sh list)"
  [ -n "$hosts" ] || hosts=$(awk '{print $2}' "$STATE/$name/hosts" | paste -sd,)
  local ids="" h k n=0
  for h in ${hosts//,/ }; do
    [ -n "$(field "$name" host "$h" 2)" ] || die "network '$name' has no host '$h'"
    for ((k = 0; k < per_host; k++)); do ids="$ids,$h" n=$((n + 1)); done
  done
  local first=${hosts%%,*}
  exec "$weft" run -n "$n" --host-ids "${ids#,}" --timeout "$timeout" -- \
    "$self" _rank "$name" "$(field "$name" host "$first" 5)" "$@"
}

# _rank NAME STORE_HOST PROGRAM ARGS...: one rank of `run`, entering its host's namespace. The
# store's port comes from the launcher's (so jobs on one network rarely collide) and lies below
# the ephemeral range, where no rank's listener can have taken it first.
rank() {
  local name=$1 store_host=$2 port=${WEFT_STORE_ADDR##*:}
  shift 2
  export WEFT_STORE_ADDR="$store_host:$((20000 + port % 10000))"
  [ "$WEFT_RANK" = 0 ] && export WEFT_HOST_STORE=1
  exec ip netns exec "$name.$WEFT_HOST_ID" "$@"
}

cmd=${1:-}
[ $# -gt 0 ] && shift
case $cmd in
  up)
    [ $# -eq 2 ] || die "usage: netns.sh up pair|two_racks|rails|zones NAME"
    topology=$1 name=$2
    check_name "$name"
    declare -F "build_$topology" >/dev/null || die "unknown topology '$topology'"
    [ "$(id -u)" = 0 ] || die "needs root (ip netns)"
    down "$name"
    mkdir -p "$STATE/$name" && : >"$STATE/$name/hosts" && : >"$STATE/$name/links" || exit 1
    if ! "build_$topology" "$name"; then
      down "$name"
      die "could not build $topology '$name'"
    fi
    show "$name"
    ;;
  down) [ $# -eq 1 ] || die "usage: netns.sh down NAME"; check_name "$1"; down "$1" ;;
  show) [ $# -eq 1 ] || die "usage: netns.sh show NAME"; show "$1" ;;
  list) ls "$STATE" 2>/dev/null ;;
  exec)
    [ $# -ge 3 ] || die "usage: netns.sh exec NAME HOST CMD..."
    ns=$(field "$1" host "$2" 3)
    [ -n "$ns" ] || die "network '$1' has no host '$2'"
    shift 2
    exec ip netns exec "$ns" "$@"
    ;;
  link)
    [ $# -eq 3 ] && [[ $3 == up || $3 == down ]] || die "usage: netns.sh link NAME LINK up|down"
    ends=$(link_ends "$1" "$2") || exit 1
    while read -r ns ifname; do ip -n "$ns" link set "$ifname" "$3" || exit 1; done <<<"$ends"
    ;;
  rate)
    [ $# -eq 3 ] && [[ $3 =~ ^[0-9]+$ ]] || die "usage: netns.sh rate NAME LINK MBIT"
    ends=$(link_ends "$1" "$2") || exit 1
    while read -r ns ifname; do cap "$ns" "$ifname" "$3" || exit 1; done <<<"$ends"
    sed -i "s|^\(link $2 .*\) [0-9]*$|\1 $3|" "$STATE/$1/links"
    ;;
  run) [ $# -ge 2 ] || die "usage: netns.sh run NAME [options] PROGRAM ARGS..."; run_job "$@" ;;
  _rank) rank "$@" ;;
  guard)
    [ $# -eq 1 ] || die "usage: netns.sh guard NAME"
    trap '' INT TERM HUP
    cat >/dev/null
    down "$1"
    ;;
  *) sed -n '2,/^set -u/p' "$self" | sed -e '/^set -u/d' -e 's/^# \{0,1\}//'; exit 2 ;;
esac
