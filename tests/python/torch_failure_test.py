"""Failures under torch.distributed with backend "weft": a timeout says " Timed out " (torch's own
barrier-timeout check passes), a killed rank makes the others raise a RuntimeError naming it
within the timeout, mismatched collectives raise on every rank instead of hanging. The driver starts the ranks itself (env:// by hand, as a user
without a launcher would) so that a dying rank does not take the job down, and fails if any rank
misbehaves or the whole thing outlives its limit.

    /usr/bin/python3 tests/python/torch_failure_test.py [timeout|barrier_timeout|kill|mismatch ...]
"""
import datetime
import os
import re
import signal
import socket
import subprocess
import sys
import time

MODES = ["timeout", "barrier_timeout", "kill", "mismatch"]
TIMEOUT_S = 3


def child(mode):
    import torch
    import torch.distributed as dist
    import weft.torch  # noqa: F401

    dist.init_process_group(backend="weft", timeout=datetime.timedelta(seconds=TIMEOUT_S))
    rank = dist.get_rank()
    t = torch.ones(1000)
    if mode == "timeout":
        if rank == 1:
            time.sleep(TIMEOUT_S + 4)  # never calls the collective
            print(f"rank {rank}: {mode}: ok", flush=True)
            return 0
        expect_error(lambda: dist.all_reduce(t), "Timed out", TIMEOUT_S + 10)
    elif mode == "barrier_timeout":
        # torch 1.13's own check (_test_barrier_timeout in distributed_test.py, written for
        # gloo): rank 0 alone enters a barrier; the error matches " (Timed out|closed|timeout) "
        # and comes no earlier than the timeout. weft's text also names the rank and operation.
        if rank == 1:
            time.sleep(TIMEOUT_S + 4)
            print(f"rank {rank}: {mode}: ok", flush=True)
            return 0
        expected = time.time() + TIMEOUT_S
        try:
            dist.barrier()
            raise SystemExit("barrier: no error raised")
        except RuntimeError as e:
            if not re.search(" (Timed out|closed|timeout) ", str(e)):
                raise SystemExit(f"barrier: torch's timeout regex does not match: {e}")
            if "rank 0: barrier #" not in str(e):
                raise SystemExit(f"barrier: the error does not name rank and operation: {e}")
            if time.time() < expected - 0.1:
                raise SystemExit(f"barrier: raised {expected - time.time():.2f} s early")
            print(f"raised: {str(e).splitlines()[0]}", flush=True)
    elif mode == "kill":
        dist.barrier()
        if rank == 1:
            os.kill(os.getpid(), signal.SIGKILL)
        time.sleep(0.2)
        expect_error(lambda: dist.all_reduce(t), "rank 1", TIMEOUT_S + 10)
    elif mode == "mismatch":
        if rank == 0:
            expect_error(lambda: dist.all_reduce(t), "broadcast", TIMEOUT_S + 10)
        else:
            expect_error(lambda: dist.broadcast(t, src=0), "allreduce", TIMEOUT_S + 10)
    print(f"rank {rank}: {mode}: ok", flush=True)
    return 0


def expect_error(call, text, limit_s):
    start = time.monotonic()
    try:
        call()
    except RuntimeError as e:
        took = time.monotonic() - start
        if text not in str(e):
            raise SystemExit(f"error does not mention '{text}': {e}")
        if took > limit_s:
            raise SystemExit(f"error came after {took:.1f} s (limit {limit_s} s)")
        print(f"raised after {took:.2f} s: {str(e).splitlines()[0]}", flush=True)
        return
    raise SystemExit("no error raised")


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def drive(mode, n=2):
    env = dict(os.environ, MASTER_ADDR="127.0.0.1", MASTER_PORT=str(free_port()),
               WORLD_SIZE=str(n))
    for k in ("WEFT_RANK", "WEFT_SIZE", "WEFT_STORE_ADDR"):
        env.pop(k, None)
    procs = [subprocess.Popen([sys.executable, __file__, "--child", mode],
                              env=dict(env, RANK=str(r), LOCAL_RANK=str(r)),
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
             for r in range(n)]
    ok = True
    for r, p in enumerate(procs):
        try:
            out, _ = p.communicate(timeout=60)
        except subprocess.TimeoutExpired:
            p.kill()
            out, _ = p.communicate()
            print(f"{mode}: rank {r} HUNG", flush=True)
            ok = False
        killed = mode == "kill" and r == 1
        want = -signal.SIGKILL if killed else 0
        if p.returncode != want or (not killed and f"{mode}: ok" not in out):
            ok = False
        print(f"--- {mode} rank {r} (exit {p.returncode}):\n{out.strip()}", flush=True)
    return ok


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "--child":
        sys.exit(child(sys.argv[2]))
    modes = sys.argv[1:] or MODES
    failed = [m for m in modes if not drive(m)]
    print("FAILED: " + " ".join(failed) if failed else "all passed", flush=True)
    sys.exit(1 if failed else 0)
