#!/bin/sh
# Real jobs started the way other launchers start them, each checked end to end: the ranks find
# each other, run their collectives, and rank 0 logs which bootstrap rule it used.
#   launchers_test.sh CHILD     (CHILD: weft_process_child)
# - Slurm and Open MPI: their rank variables set by hand (srun may not exist here), store at
#   MASTER_ADDR:MASTER_PORT hosted by rank 0;
# - mpirun itself, when installed (Open MPI's variables, store at MASTER_ADDR:MASTER_PORT);
# - torchrun (Debian's python3-torch), when installed, both ways it starts ranks: with the
#   agent's store (static rendezvous: weft's store on MASTER_PORT+1) and --standalone (no agent
#   store: weft's store on MASTER_PORT).
set -u
child=$1
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
export WEFT_LOG_LEVEL=info
failed=0

free_port() {
  /usr/bin/python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

# free_port_pair: a port P where P and P+1 are both free on every address, drawn below the
# kernel's ephemeral range so the other tests' port-0 sockets cannot take P+1 meanwhile
# (torchrun's agent store takes P, weft's store P+1).
free_port_pair() {
  /usr/bin/python3 - <<'PY'
import random, socket
lo = int(open("/proc/sys/net/ipv4/ip_local_port_range").read().split()[0])
for _ in range(1000):
    p = random.randrange(10000, max(10001, lo - 2))
    socks = []
    try:
        for q in (p, p + 1):
            s = socket.socket()
            s.bind(("", q))
            socks.append(s)
    except OSError:
        continue
    finally:
        for s in socks:
            s.close()
    print(p)
    break
else:
    raise SystemExit("no free port pair")
PY
}

# check NAME RULE LOG: every rank printed "all N allreduces done" and the log names RULE.
check() {
  name=$1 rule=$2 log=$3 ranks=$4
  done_lines=$(grep -c "allreduces done" "$log")
  if [ "$done_lines" -ne "$ranks" ] || ! grep -q "launched by $rule" "$log"; then
    echo "FAIL $name: expected $ranks ranks done and 'launched by $rule'"
    cat "$log"
    failed=1
  else
    echo "ok   $name ($(grep -o "launched by .*" "$log" | head -1))"
  fi
}

# by_hand NAME RULE N VARS...: starts N ranks; in VARS, %r is replaced by the rank.
by_hand() {
  name=$1 rule=$2 n=$3
  shift 3
  port=$(free_port)
  : > "$dir/$name.log"
  r=0
  pids=""
  while [ "$r" -lt "$n" ]; do
    vars=$(echo "$@" | sed "s/%r/$r/g")
    env $vars MASTER_ADDR=127.0.0.1 MASTER_PORT="$port" timeout 120 "$child" -1 5 \
      >> "$dir/$name.log" 2>&1 &
    pids="$pids $!"
    r=$((r + 1))
  done
  for p in $pids; do wait "$p" || echo "rank process $p failed" >> "$dir/$name.log"; done
  check "$name" "$rule" "$dir/$name.log" "$n"
}

by_hand slurm "Slurm (weft store at MASTER_ADDR:MASTER_PORT" 3 \
  SLURM_PROCID=%r SLURM_NTASKS=3 SLURM_LOCALID=%r "SLURM_TASKS_PER_NODE=3(x1)"
by_hand open-mpi-variables "Open MPI (weft store at MASTER_ADDR:MASTER_PORT" 3 \
  OMPI_COMM_WORLD_RANK=%r OMPI_COMM_WORLD_SIZE=3 OMPI_COMM_WORLD_LOCAL_RANK=%r \
  OMPI_COMM_WORLD_LOCAL_SIZE=3

if command -v mpirun > /dev/null 2>&1; then
  port=$(free_port)
  MASTER_ADDR=127.0.0.1 MASTER_PORT=$port timeout 120 mpirun --allow-run-as-root --oversubscribe \
    -np 2 -x MASTER_ADDR -x MASTER_PORT -x WEFT_LOG_LEVEL "$child" -1 5 > "$dir/mpirun.log" 2>&1
  check mpirun "Open MPI (weft store at MASTER_ADDR:MASTER_PORT" "$dir/mpirun.log" 2
else
  echo "skip mpirun (not installed)"
fi

if [ -x /usr/bin/torchrun ]; then
  # Debian's torch 1.13 on Python 3.11 cannot parse --redirects/--tee 0, so pass 1.
  port=$(free_port_pair)
  timeout 180 /usr/bin/torchrun --no_python --nnodes 1 --nproc_per_node 2 --master_addr 127.0.0.1 \
    --master_port "$port" --redirects 1 --tee 1 "$child" -1 5 > "$dir/torchrun.log" 2>&1
  check torchrun-agent-store "torchrun (agent store; weft store on MASTER_PORT+1" \
    "$dir/torchrun.log" 2
  timeout 180 /usr/bin/torchrun --no_python --standalone --nproc_per_node 2 --redirects 1 --tee 1 \
    "$child" -1 5 > "$dir/standalone.log" 2>&1
  check torchrun-standalone "torchrun variables without agent store" "$dir/standalone.log" 2
else
  echo "skip torchrun (python3-torch not installed)"
fi
exit $failed
