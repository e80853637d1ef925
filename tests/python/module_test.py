"""The Python module on N ranks (run under `weft run -n N`): every collective and dtype/op against
numpy references, async forms, point-to-point, split, stores and errors. Exits non-zero on the
first failure."""
import datetime
import sys
import threading
import time

import numpy as np

import weft

comm = weft.init(timeout=datetime.timedelta(seconds=60))
rank, n = comm.rank, comm.size

DTYPES = [np.int8, np.uint8, np.int32, np.int64, np.float16, np.float32, np.float64]
OPS = ["sum", "prod", "min", "max", "avg"]


def data(r, count, dtype):
    # Small values so that products and sums stay exact in every dtype.
    return ((np.arange(count) + r) % 3 + 1).astype(dtype)


def reference(op, arrays):
    a = np.stack([x.astype(np.float64) for x in arrays])
    if op == "sum":
        return a.sum(0)
    if op == "prod":
        return a.prod(0)
    if op == "min":
        return a.min(0)
    if op == "max":
        return a.max(0)
    return a.sum(0) / len(arrays)


def expect(cond, what):
    if not cond:
        print(f"rank {rank}: FAILED: {what}", flush=True)
        sys.exit(1)


def check_close(got, want, what, dtype):
    if np.issubdtype(dtype, np.integer):
        # avg on integers truncates toward zero, as C does
        ok = np.array_equal(got.astype(np.int64), np.trunc(want).astype(np.int64))
    else:
        ok = np.allclose(got.astype(np.float64), want, rtol=1e-2 if dtype == np.float16 else 1e-6)
    expect(ok, f"{what}: got {got[:8]} want {want[:8]}")


# allreduce: every dtype x op, in place and out of place, and the async form.
for count in (0, 1, 1001):
    for dtype in DTYPES:
        for op in OPS:
            if op == "prod" and dtype in (np.int8, np.uint8) and n > 4:
                continue
            want = reference(op, [data(r, count, dtype) for r in range(n)])
            x = data(rank, count, dtype)
            comm.allreduce(x, op=op)
            check_close(x, want, f"allreduce {dtype.__name__} {op} x{count} in place", dtype)
            y = np.empty_like(x)
            w = comm.allreduce(data(rank, count, dtype), y, op=op, async_op=True)
            w.wait()
            expect(w.is_completed() and w.is_success(), "async allreduce completed")
            check_close(y, want, f"allreduce {dtype.__name__} {op} x{count} async", dtype)

# Bitwise ops on the integer types; floating types are rejected.
for dtype in (np.int8, np.uint8, np.int32, np.int64):
    for op, fn in (("band", np.bitwise_and), ("bor", np.bitwise_or), ("bxor", np.bitwise_xor)):
        x = data(rank, 77, dtype) * 3
        comm.allreduce(x, op=op)
        want = data(0, 77, dtype) * 3
        for r in range(1, n):
            want = fn(want, data(r, 77, dtype) * 3)
        expect(np.array_equal(x, want), f"allreduce {dtype.__name__} {op}")
try:
    comm.allreduce(np.zeros(4, np.float32), op="bxor")
    expect(False, "bxor on float32 did not raise")
except weft.Error as e:
    expect(e.code == "invalid_argument" and "integer" in str(e), str(e))

# bool arrays as NCCL reduces booleans: sum and max a logical or, prod and min a logical and,
# band/bor/bxor elementwise. Element i of rank r is bit r of i, so every combination of the
# ranks' values occurs (all true, all false, mixed).
def bools(r, count):
    return ((np.arange(count) % (1 << n)) >> r & 1).astype(np.bool_)


every = np.stack([bools(r, 50) for r in range(n)])
LOGICAL = {"sum": every.any(0), "max": every.any(0), "prod": every.all(0), "min": every.all(0),
           "band": every.all(0), "bor": every.any(0), "bxor": np.logical_xor.reduce(every, 0)}
for op, want in LOGICAL.items():
    x = bools(rank, 50)
    comm.allreduce(x, op=op)
    expect(x.dtype == np.bool_ and np.array_equal(x, want), f"allreduce bool {op}: {x[:8]}")
    y = np.zeros(50, np.bool_)
    comm.allreduce(bools(rank, 50), y, op=op, async_op=True).wait()
    expect(np.array_equal(y, want), f"allreduce bool {op} async")
for root in range(n):
    out = np.zeros(50, np.bool_) if rank == root else None
    comm.reduce(bools(rank, 50), out, op="prod", root=root)
    if rank == root:
        expect(np.array_equal(out, every.all(0)), f"reduce bool prod to {root}")
rsb = np.zeros(3, np.bool_)
comm.reduce_scatter(np.concatenate([bools(rank, 3 * n)[3 * k:3 * k + 3] for k in range(n)]), rsb,
                    op="max")
expect(np.array_equal(rsb, np.stack([bools(r, 3 * n) for r in range(n)]).any(0)[3 * rank:3 * rank + 3]),
       f"reduce_scatter bool {rsb}")
gb = np.zeros(n * 5, np.bool_)
comm.allgather(bools(rank, 5), gb)
expect(np.array_equal(gb, np.concatenate([bools(r, 5) for r in range(n)])), "allgather bool")
bb = bools(rank, 9)
comm.broadcast(bb, root=n - 1)
expect(np.array_equal(bb, bools(n - 1, 9)), "broadcast bool")
comm.allreduce(np.ones(3, np.uint8), dtype="bool", op="sum")  # dtype="bool" for 1-byte buffers
for bad, exc, text in [
        (lambda: comm.allreduce(bools(rank, 4), op="avg"), ValueError, "not supported for bool"),
        (lambda: comm.allreduce(bools(rank, 4), np.zeros(4, np.uint8)), TypeError,
         "bool vs u8"),
        (lambda: comm.allreduce(np.zeros(4, np.int32), dtype="bool"), ValueError, "1-byte")]:
    try:
        bad()
        expect(False, f"no error ({text})")
    except exc as e:
        expect(text in str(e), f"unclear error: {e}")

# bfloat16 through raw bits.
f = data(rank, 64, np.float32)
bits = (f.view(np.uint32) >> 16).astype(np.uint16)
comm.allreduce(bits, dtype="bf16")
got = (bits.astype(np.uint32) << 16).view(np.float32)
check_close(got, reference("sum", [data(r, 64, np.float32) for r in range(n)]), "bf16 sum",
            np.float32)

# broadcast and reduce from every root.
for root in range(n):
    b = data(rank, 100, np.float32)
    comm.broadcast(b, root=root)
    check_close(b, data(root, 100, np.float32).astype(np.float64), f"broadcast root {root}",
                np.float32)
    out = np.zeros(100, np.float64)
    comm.reduce(data(rank, 100, np.float64), out, op="max", root=root)
    if rank == root:
        check_close(out, reference("max", [data(r, 100, np.float64) for r in range(n)]),
                    f"reduce root {root}", np.float64)

# allgather, allgatherv, reduce_scatter, gather, scatter, alltoall, alltoallv.
g = np.zeros(n * 7, np.int32)
comm.allgather(np.full(7, rank, np.int32), g)
expect(np.array_equal(g, np.repeat(np.arange(n), 7)), "allgather")
counts = [r + 1 for r in range(n)]
gv = np.zeros(sum(counts), np.int64)
comm.allgatherv(np.full(rank + 1, rank, np.int64), gv, counts)
expect(np.array_equal(gv, np.repeat(np.arange(n), counts)), "allgatherv")
rs = np.zeros(5, np.float32)
comm.reduce_scatter(np.tile(np.arange(n, dtype=np.float32).repeat(5), 1) + rank, rs)
expect(np.allclose(rs, rank * n + sum(range(n))), f"reduce_scatter {rs}")
gat = np.zeros(3 * n, np.float64) if rank == 0 else None
comm.gather(np.full(3, rank, np.float64), gat, root=0)
if rank == 0:
    expect(np.array_equal(gat, np.repeat(np.arange(n), 3).astype(np.float64)), "gather")
sc = np.zeros(4, np.int8)
comm.scatter(np.repeat(np.arange(n), 4).astype(np.int8) if rank == n - 1 else None, sc,
             root=n - 1)
expect(np.array_equal(sc, np.full(4, rank, np.int8)), "scatter")
a2a = np.zeros(2 * n, np.int32)
comm.alltoall(np.arange(2 * n, dtype=np.int32) + 100 * rank, a2a)
expect(np.array_equal(a2a, np.array([100 * s + 2 * rank + k for s in range(n) for k in range(2)])),
       f"alltoall {a2a}")
send_counts = [s + 1 for s in range(n)]          # to peer s: s + 1 elements
recv_counts = [rank + 1] * n                     # from every peer: rank + 1 elements
sendv = np.concatenate([np.full(s + 1, 10 * rank + s, np.float32) for s in range(n)])
recvv = np.zeros(sum(recv_counts), np.float32)
comm.alltoallv(sendv, send_counts, recvv, recv_counts)
expect(np.array_equal(recvv, np.concatenate([np.full(rank + 1, 10 * s + rank, np.float32)
                                             for s in range(n)])), "alltoallv")
comm.barrier()
comm.barrier(async_op=True).wait()

# point-to-point around a ring, both forms, with a bytearray.
right, left = (rank + 1) % n, (rank - 1) % n
inbox = bytearray(1 << 16)
w = comm.recv(inbox, left, tag=3, async_op=True)
comm.send(bytes([rank % 256]) * (1 << 16), right, tag=3)
w.wait(timeout=30)
expect(inbox[-1] == left % 256, "send/recv ring")

# receives from any rank return the sender.
if rank == 0:
    seen = set()
    for _ in range(n - 1):
        b = bytearray(8)
        src = comm.recv(b, tag=11)  # peer defaults to weft.ANY_SOURCE
        expect(b[0] == src, f"any-source data {b[0]} from {src}")
        seen.add(src)
    expect(seen == set(range(1, n)), f"any-source senders {seen}")
    w = comm.recv(bytearray(8), weft.ANY_SOURCE, tag=12, async_op=True)
    comm.send(bytes([rank]) * 8, 0, tag=12)
    w.wait()
    expect(w.source() == 0, "async any-source receive from oneself")
else:
    comm.send(bytes([rank]) * 8, 0, tag=11)

# split: even and odd ranks.
sub = comm.split(rank % 2, rank)
expect(sub.size == (n + 1 - rank % 2) // 2, "split size")
s = np.array([1.0])
sub.allreduce(s)
expect(s[0] == sub.size, "allreduce on the sub-communicator")

# sparse_allreduce: rows of a table, repeated within a rank and shared across ranks, rank 1
# without rows; every dtype, row shapes (), (3,) and (2, 2); both algorithms through the
# automatic choice (a few rows, then most of the table); the async form; identical on all ranks.
def sparse_rows(r, num_rows, dense):
    if r == 1 and not dense:
        return np.zeros(0, dtype=np.int64)
    if dense:
        return np.array([i for i in range(num_rows) if (i + r) % 5 != 0][::-1] + [0], np.int64)
    return np.array([7, r % num_rows, 7, 30, (3 * r + 2) % num_rows], dtype=np.int64)


def sparse_values(r, idx, shape, dtype):
    v = (np.arange(len(idx) * int(np.prod(shape))) + r) % 4
    return v.reshape((len(idx),) + shape).astype(dtype)


for dense in (False, True):
    for dtype in DTYPES:
        for shape in ((), (3,), (2, 2)):
            num_rows = 40
            want = {}
            for r in range(n):
                idx = sparse_rows(r, num_rows, dense)
                for i, row in zip(idx, sparse_values(r, idx, shape, dtype).astype(np.float64)):
                    want[int(i)] = want.get(int(i), 0) + row
            idx = sparse_rows(rank, num_rows, dense)
            vals = sparse_values(rank, idx, shape, dtype)
            what = f"sparse_allreduce {np.dtype(dtype).name} {shape} dense={dense}"
            got_i, got_v = comm.sparse_allreduce(idx, vals, num_rows)
            expect(got_i.dtype == np.int64 and got_v.dtype == dtype, f"{what}: dtypes")
            expect(got_v.shape == (len(want),) + shape, f"{what}: shape {got_v.shape}")
            expect(list(got_i) == sorted(want), f"{what}: indices {got_i}")
            expect(np.array_equal(got_v.astype(np.float64), np.array([want[i] for i in sorted(want)]).reshape(got_v.shape)),
                   f"{what}: values")
            # Every rank holds the same bytes.
            mine = np.frombuffer(got_i.tobytes() + got_v.tobytes(), dtype=np.uint8)
            rank0 = mine.copy()
            if len(mine):
                comm.broadcast(rank0, root=0)
            expect(np.array_equal(mine, rank0), f"{what}: differs from rank 0's result")
w = comm.sparse_allreduce(np.array([rank], np.int64), np.ones((1, 2), np.float32), n,
                          async_op=True)
got_i, got_v = w.result()
expect(list(got_i) == list(range(n)) and got_v.shape == (n, 2) and (got_v == 1).all(),
       f"sparse_allreduce async: {got_i} {got_v}")
try:
    comm.sparse_allreduce(np.array([0], np.int64), np.ones(1, np.float32), 4, op="max")
    expect(False, "sparse_allreduce op=max raised nothing")
except weft.Error as e:
    expect("only sum is supported" in str(e) and e.code == "invalid_argument", str(e))
try:
    comm.sparse_allreduce(np.array([4], np.int64), np.ones(1, np.float32), 4)
    expect(False, "sparse_allreduce of a row outside the table raised nothing")
except weft.Error as e:
    expect("outside the table's 4 rows" in str(e), str(e))

# errors: bad arguments raise before anything is sent.
for bad, exc in [(lambda: comm.allreduce([1, 2, 3]), TypeError),
                 (lambda: comm.allreduce(np.zeros(3), np.zeros(4)), ValueError),
                 (lambda: comm.allreduce(np.zeros(3), op="xor"), ValueError),
                 (lambda: comm.allreduce(np.zeros((4, 4))[:, 1]), ValueError),
                 (lambda: comm.allreduce(np.zeros(3, np.uint32)), TypeError),
                 (lambda: comm.broadcast(np.zeros(3), root=n), weft.Error)]:
    try:
        bad()
        expect(False, "bad arguments did not raise")
    except exc as e:
        if isinstance(e, weft.Error):
            expect(e.code == "invalid_argument", f"error code {e.code}")

# stores from Python.
if rank == 0:
    server = weft.TCPStoreServer()
    ms = weft.MemoryStore()
    ms.set("k", b"v")
    expect(ms.get("k") == b"v" and ms.add("c", 2) == 2, "memory store")
    client = weft.TCPStore("127.0.0.1", server.port, timeout=10)
    client.set("x", b"1")
    expect(client.get("x") == b"1", "tcp store")
    try:
        client.get("missing", timeout=0.2)
        expect(False, "store get did not time out")
    except weft.TimeoutError:
        pass

# threads as ranks: explicit rank, size and store, and a timeout naming the operation.
if rank == 0:
    st = weft.MemoryStore()
    errors = []
    done = threading.Event()

    def lone(r):
        c = weft.init(rank=r, size=2, store=st, timeout=datetime.timedelta(seconds=1))
        if r == 0:
            try:
                c.recv(bytearray(4), 1, tag=9)  # rank 1 never sends
                errors.append("no timeout")
            except weft.TimeoutError as e:
                if " Timed out " not in str(e) or not isinstance(e, TimeoutError):
                    errors.append(str(e))
            done.set()
        else:
            done.wait(30)
        c.abort()

    ts = [threading.Thread(target=lone, args=(r,)) for r in range(2)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    expect(not errors, f"timeout: {errors}")

    # Ranks as threads that just drop their communicators: the graceful close of each waits for
    # the other's goodbye, which must not be held up by the GIL.
    st2 = weft.MemoryStore()

    def dropper(r):
        c = weft.init(rank=r, size=2, store=st2, timeout=datetime.timedelta(seconds=20))
        x = np.ones(4)
        c.allreduce(x)
        del c  # destroyed here, closing gracefully

    t0 = time.monotonic()
    ts = [threading.Thread(target=dropper, args=(r,)) for r in range(2)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    expect(time.monotonic() - t0 < 10, f"dropping thread-rank communicators took "
           f"{time.monotonic() - t0:.1f} s")

    # Fault tolerance from Python (threads as ranks): agree, grow by a joiner, revoke, shrink.
    st3 = weft.MemoryStore()
    ft_errors = []

    def member(r):
        try:
            c = weft.init(rank=r, size=2, store=st3, timeout=datetime.timedelta(seconds=20))
            flag, alive, failed = c.agree(0b11 if r == 0 else 0b10)
            if (flag, alive, failed) != (0b10, [0, 1], []):
                ft_errors.append(f"agree: {(flag, alive, failed)}")
            if r == 0:
                while c.pending_joins() < 1:
                    time.sleep(0.01)
            g = c.grow(1)
            x = np.full(4, float(g.rank + 1))
            g.allreduce(x)
            if g.size != 3 or g.rank != r or not np.all(x == 6.0):
                ft_errors.append(f"grow: size {g.size} rank {g.rank} {x}")
            if r == 0:
                time.sleep(0.3)  # the others' last allreduce messages are out (revoke drops queued ones)
                g.revoke()
            try:
                g.barrier()
                ft_errors.append("barrier after revoke succeeded")
            except weft.Error as e:
                if e.code != "revoked":
                    ft_errors.append(f"revoke: {e.code}: {e}")
            s = g.shrink()
            y = np.ones(2)
            s.allreduce(y)
            if s.size != 3 or not np.all(y == 3.0):
                ft_errors.append(f"shrink: size {s.size} {y}")
        except Exception as e:  # noqa: BLE001
            ft_errors.append(f"rank {r}: {e}")

    def joiner():
        try:
            g = weft.join(st3, timeout=datetime.timedelta(seconds=20))
            x = np.full(4, float(g.rank + 1))
            g.allreduce(x)
            if g.rank != 2 or not np.all(x == 6.0):
                ft_errors.append(f"joiner: rank {g.rank} {x}")
            try:
                g.barrier()
            except weft.Error as e:
                if e.code != "revoked":
                    ft_errors.append(f"joiner revoke: {e.code}")
            s = g.shrink()
            y = np.ones(2)
            s.allreduce(y)
        except Exception as e:  # noqa: BLE001
            ft_errors.append(f"joiner: {e}")

    ts = [threading.Thread(target=member, args=(r,)) for r in range(2)]
    ts.append(threading.Thread(target=joiner))
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    expect(not ft_errors, f"fault tolerance: {ft_errors}")

rec = comm.flight_record()
expect(rec["rank"] == rank and rec["entries"], "flight record")
last = rec["entries"][-1]
expect(last["state"] == "done" and last["describe"].startswith(last["op"]),
       f"last recorded op {last}")



def barrier_count(text):
    return sum(float(line.rsplit(" ", 1)[1]) for line in text.splitlines()
               if line.startswith("weft_collectives_total{") and 'op="barrier"' in line)


before = barrier_count(comm.metrics())
comm.barrier()
text = comm.metrics()
expect(barrier_count(text) == before + 1, f"metrics: barriers {before} then {barrier_count(text)}")
expect(f'rank="{rank}"' in text and "weft_collective_duration_seconds_bucket" in text,
       "metrics text")
comm.shutdown()
print(f"rank {rank}: module test passed", flush=True)
