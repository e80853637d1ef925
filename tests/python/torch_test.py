"""torch.distributed with backend "weft" on N ranks (run under `weft run -n N`, which sets the
env:// variables): every collective the backend offers, every dtype and op, checked against a
reference computed locally and against backend "gloo" (a second group in the same job) wherever
gloo supports the call. Exits non-zero on the first failure."""
import datetime
import sys
import warnings

import torch
import torch.distributed as dist

import weft.torch  # noqa: F401  registers the backend

warnings.filterwarnings("ignore", message=".*deprecated.*")

dist.init_process_group(backend="weft", timeout=datetime.timedelta(seconds=60))
rank, n = dist.get_rank(), dist.get_world_size()
gloo = dist.new_group(backend="gloo")
assert dist.get_backend() == "weft", dist.get_backend()

DTYPES = [torch.int8, torch.uint8, torch.int32, torch.int64, torch.float16, torch.bfloat16,
          torch.float32, torch.float64]
OPS = {"SUM": dist.ReduceOp.SUM, "PRODUCT": dist.ReduceOp.PRODUCT, "MIN": dist.ReduceOp.MIN,
       "MAX": dist.ReduceOp.MAX, "AVG": dist.ReduceOp.AVG}
checks = 0


def fail(what):
    print(f"rank {rank}: FAILED: {what}", flush=True)
    sys.exit(1)


def data(r, count, dtype, salt=0):
    return ((torch.arange(count) + r + salt) % 3 + 1).to(dtype)


def reference(name, tensors):
    a = torch.stack([t.double() for t in tensors])
    if name == "SUM":
        return a.sum(0)
    if name == "PRODUCT":
        return a.prod(0)
    if name == "MIN":
        return a.min(0).values
    if name == "MAX":
        return a.max(0).values
    return a.sum(0) / len(tensors)


def same(got, want, what):
    global checks
    checks += 1
    got = got.double()
    want = want.double()
    if got.shape != want.shape:
        fail(f"{what}: shape {tuple(got.shape)} vs {tuple(want.shape)}")
    tol = 2e-2 if got.dtype in (torch.float16, torch.bfloat16) else 1e-6
    if not torch.allclose(got, want, rtol=tol, atol=tol):
        fail(f"{what}: got {got.flatten()[:6].tolist()} want {want.flatten()[:6].tolist()}")


def with_gloo(fn):
    """Runs fn(group) on gloo; None when gloo does not support the call."""
    try:
        return fn(gloo)
    except RuntimeError as e:
        if "does not support" in str(e) or "Invalid" in str(e) or "Unsupported" in str(e) \
                or "Cannot use" in str(e) or "not supported" in str(e).lower() \
                or "not implemented" in str(e):
            return None
        raise


# all_reduce: dtype x op x count, against the local reference and gloo.
for count in (1, 1000):
    for dtype in DTYPES:
        for name, op in OPS.items():
            if name == "AVG" and not dtype.is_floating_point:
                continue
            t = data(rank, count, dtype)
            dist.all_reduce(t, op=op)
            want = reference(name, [data(r, count, dtype) for r in range(n)])
            same(t, want.to(dtype), f"all_reduce {dtype} {name} x{count}")
            g = with_gloo(lambda grp: (lambda x: (dist.all_reduce(x, op=op, group=grp), x)[1])(
                data(rank, count, dtype)))
            if g is not None:
                same(t, g, f"all_reduce {dtype} {name} x{count} vs gloo")

# Bitwise ops on the integer types, against Python's operators and gloo.
BITWISE = {"BAND": (dist.ReduceOp.BAND, lambda a, b: a & b),
           "BOR": (dist.ReduceOp.BOR, lambda a, b: a | b),
           "BXOR": (dist.ReduceOp.BXOR, lambda a, b: a ^ b)}
for dtype in (torch.int8, torch.uint8, torch.int32, torch.int64):
    for name, (op, fn) in BITWISE.items():
        t = data(rank, 100, dtype, 1) * 5
        dist.all_reduce(t, op=op)
        want = data(0, 100, dtype, 1) * 5
        for r in range(1, n):
            want = fn(want, data(r, 100, dtype, 1) * 5)
        same(t, want, f"all_reduce {dtype} {name}")
        g = with_gloo(lambda grp: (lambda x: (dist.all_reduce(x, op=op, group=grp), x)[1])(
            data(rank, 100, dtype, 1) * 5))
        if g is not None:
            same(t, g, f"all_reduce {dtype} {name} vs gloo")

# async_op, Work and its Future (what DDP uses).
t = data(rank, 4096, torch.float32)
work = dist.all_reduce(t, async_op=True)
work.wait()
same(work.get_future().value()[0], reference("SUM", [data(r, 4096, torch.float32)
                                                     for r in range(n)]), "async all_reduce")
if not work.is_completed():
    fail("work state after wait")

# Non-contiguous tensors are copied in and back.
m = torch.stack([data(rank, 50, torch.float32), torch.zeros(50)], dim=1)  # 50 x 2
col = m[:, 0]
dist.all_reduce(col)
same(m[:, 0], reference("SUM", [data(r, 50, torch.float32) for r in range(n)]),
     "all_reduce of a non-contiguous column")
same(m[:, 1], torch.zeros(50), "the other column untouched")

# all_reduce_coalesced.
ts = [data(rank, 10, torch.float64), data(rank, 7, torch.float64, 1)]
dist.all_reduce_coalesced(ts)
same(ts[0], reference("SUM", [data(r, 10, torch.float64) for r in range(n)]), "coalesced 0")
same(ts[1], reference("SUM", [data(r, 7, torch.float64, 1) for r in range(n)]), "coalesced 1")

# broadcast and reduce from every root.
for root in range(n):
    for dtype in (torch.float32, torch.bfloat16, torch.int64):
        b = data(rank, 33, dtype)
        dist.broadcast(b, src=root)
        same(b, data(root, 33, dtype), f"broadcast {dtype} from {root}")
    r_ = data(rank, 33, torch.float32)
    dist.reduce(r_, dst=root, op=dist.ReduceOp.MAX)
    if rank == root:
        same(r_, reference("MAX", [data(r, 33, torch.float32) for r in range(n)]),
             f"reduce to {root}")

# all_gather, _all_gather_base, all_gather_coalesced, gather, scatter.
for dtype in DTYPES:
    outs = [torch.zeros(5, dtype=dtype) for _ in range(n)]
    dist.all_gather(outs, data(rank, 5, dtype))
    for r in range(n):
        same(outs[r], data(r, 5, dtype), f"all_gather {dtype} slot {r}")
    g = with_gloo(lambda grp: (lambda o: (dist.all_gather(o, data(rank, 5, dtype), group=grp), o)[1])(
        [torch.zeros(5, dtype=dtype) for _ in range(n)]))
    if g is not None:
        for r in range(n):
            same(outs[r], g[r], f"all_gather {dtype} vs gloo")
flat = torch.zeros(n * 6)
dist.all_gather_into_tensor(flat, data(rank, 6, torch.float32))
same(flat, torch.cat([data(r, 6, torch.float32) for r in range(n)]), "all_gather_into_tensor")
lists = [[torch.zeros(3), torch.zeros(2, 2)] for _ in range(n)]
dist.all_gather_coalesced(lists, [data(rank, 3, torch.float32),
                                  data(rank, 4, torch.float32, 2).view(2, 2)])
for r in range(n):
    same(lists[r][0], data(r, 3, torch.float32), "all_gather_coalesced 0")
    same(lists[r][1], data(r, 4, torch.float32, 2).view(2, 2), "all_gather_coalesced 1")
for root in range(n):
    gl = [torch.zeros(4, dtype=torch.int32) for _ in range(n)] if rank == root else None
    dist.gather(data(rank, 4, torch.int32), gather_list=gl, dst=root)
    if rank == root:
        for r in range(n):
            same(gl[r], data(r, 4, torch.int32), f"gather to {root}")
    out = torch.zeros(4, dtype=torch.float16)
    sl = [data(r, 4, torch.float16, 5) for r in range(n)] if rank == root else None
    dist.scatter(out, scatter_list=sl, src=root)
    same(out, data(rank, 4, torch.float16, 5), f"scatter from {root}")

# reduce_scatter and _reduce_scatter_base.
out = torch.zeros(8)
dist.reduce_scatter(out, [data(rank, 8, torch.float32, r) for r in range(n)])
same(out, reference("SUM", [data(s, 8, torch.float32, rank) for s in range(n)]), "reduce_scatter")
out = torch.zeros(3, dtype=torch.float64)
dist.reduce_scatter_tensor(out, torch.cat([data(rank, 3, torch.float64, r) for r in range(n)]),
                          op=dist.ReduceOp.MIN)
same(out, reference("MIN", [data(s, 3, torch.float64, rank) for s in range(n)]),
     "reduce_scatter_tensor")

# all_to_all_single (equal and uneven splits) and all_to_all, against gloo too.
inp = torch.arange(2 * n, dtype=torch.float32) + 100 * rank
out = torch.zeros(2 * n)
dist.all_to_all_single(out, inp)
want = torch.tensor([100 * s + 2 * rank + k for s in range(n) for k in range(2)],
                    dtype=torch.float32)
same(out, want, "all_to_all_single")
g = with_gloo(lambda grp: (lambda o: (dist.all_to_all_single(o, inp, group=grp), o)[1])(
    torch.zeros(2 * n)))
if g is not None:
    same(out, g, "all_to_all_single vs gloo")
in_splits = [s + 1 for s in range(n)]    # rows to peer s
out_splits = [rank + 1] * n              # rows from every peer
inp = torch.cat([torch.full((s + 1, 2), 10.0 * rank + s) for s in range(n)])
out = torch.zeros(sum(out_splits), 2)
dist.all_to_all_single(out, inp, out_splits, in_splits)
same(out, torch.cat([torch.full((rank + 1, 2), 10.0 * s + rank) for s in range(n)]),
     "all_to_all_single with splits")
outs = [torch.zeros(s + 1, dtype=torch.int64) for s in range(n)]
dist.all_to_all(outs, [torch.full((rank + 1,), 10 * rank + s, dtype=torch.int64)
                       for s in range(n)])
for s in range(n):
    same(outs[s], torch.full((s + 1,), 10 * s + rank), f"all_to_all from {s}")

# send/recv around a ring, blocking and isend/irecv.
right, left = (rank + 1) % n, (rank - 1) % n
if n > 1:
    buf = torch.zeros(1000, dtype=torch.bfloat16)
    req = dist.irecv(buf, src=left, tag=4)
    dist.send(data(rank, 1000, torch.bfloat16), dst=right, tag=4)
    req.wait()
    same(buf, data(left, 1000, torch.bfloat16), "send/recv ring")
    if rank % 2 == 0:
        dist.send(torch.full((3,), float(rank)), dst=right)
        x = torch.zeros(3)
        dist.recv(x, src=left)
    else:
        x = torch.zeros(3)
        dist.recv(x, src=left)
        dist.send(torch.full((3,), float(rank)), dst=right)
    same(x, torch.full((3,), float(left)), "blocking send/recv")

# recv without src (recv_anysource) returns the sender.
if rank == 0:
    srcs = set()
    for _ in range(n - 1):
        x = torch.zeros(4)
        src = dist.recv(x)
        same(x, torch.full((4,), float(src)), "recv from any source")
        srcs.add(src)
    if srcs != set(range(1, n)):
        fail(f"recv from any source: senders {srcs}")
else:
    dist.send(torch.full((4,), float(rank)), dst=0)

# Subgroups: new_group of the first two ranks, and every rank alone.
if n >= 2:
    sub = dist.new_group([0, 1], backend="weft")
    if rank < 2:
        t = torch.ones(3)
        dist.all_reduce(t, group=sub)
        same(t, torch.full((3,), 2.0), "all_reduce in new_group([0, 1])")
dist.barrier()

# Sparse COO all_reduce (SUM), as gloo does it: in place, coalesced, equal to gloo's result and to
# the dense sum. Uncoalesced inputs with repeated entries, rank 1 without entries, one and two
# sparse dimensions with and without dense ones, every dtype; async Work.result() too.
def sparse_input(r, dtype, size, sparse_dim):
    g = torch.Generator().manual_seed(r + 7)
    nnz = 0 if r == 1 else 6
    idx = torch.stack([torch.randint(0, size[d], (nnz,), generator=g) for d in range(sparse_dim)])
    if nnz:
        idx = torch.cat([idx, idx[:, :2]], 1)  # repeated entries
    vals = torch.randint(0, 4, (idx.size(1),) + tuple(size[sparse_dim:]), generator=g).to(dtype)
    return torch.sparse_coo_tensor(idx, vals, size)


for dtype in DTYPES:
    for size, sparse_dim in [((50,), 1), ((50, 3), 1), ((10, 6), 2), ((7, 5, 2), 2)]:
        what = f"sparse all_reduce {dtype} {size} sparse_dim {sparse_dim}"
        t = sparse_input(rank, dtype, size, sparse_dim)
        want = sum(sparse_input(r, dtype, size, sparse_dim).to_dense().double() for r in range(n))
        mine = t
        dist.all_reduce(t)
        if t is not mine or not t.is_sparse or not t.is_coalesced():
            fail(f"{what}: not in place or not coalesced")
        same(t.to_dense(), want, what)
        g = with_gloo(lambda grp: (lambda x: (dist.all_reduce(x, group=grp), x)[1])(
            sparse_input(rank, dtype, size, sparse_dim)))
        if g is not None and not (torch.equal(t._indices(), g._indices()) and
                                  torch.equal(t._values().double(), g._values().double())):
            fail(f"{what}: differs from gloo's result")
w = dist.all_reduce(sparse_input(rank, torch.float32, (50, 3), 1), async_op=True)
w.wait()
same(w.result()[0].to_dense(),
     sum(sparse_input(r, torch.float32, (50, 3), 1).to_dense() for r in range(n)),
     "sparse all_reduce async result()")

# bool tensors as NCCL reduces them: SUM and MAX a logical or, PRODUCT and MIN a logical and,
# BAND/BOR/BXOR elementwise; in every collective where the type matters. Element i of rank r is
# bit r of i, so every combination of the ranks' values occurs (all true, all false, mixed).
def bools(r, count):
    return ((torch.arange(count) % (1 << n)) >> r & 1).to(torch.bool)


def same_bool(got, want, what):
    global checks
    checks += 1
    if got.dtype != torch.bool or not torch.equal(got, want):
        fail(f"{what}: got {got.flatten()[:8].tolist()} ({got.dtype}) "
             f"want {want.flatten()[:8].tolist()}")


every = torch.stack([bools(r, 40) for r in range(n)])
ANY, ALL = every.any(0), every.all(0)
LOGICAL = {"SUM": (dist.ReduceOp.SUM, ANY), "MAX": (dist.ReduceOp.MAX, ANY),
           "PRODUCT": (dist.ReduceOp.PRODUCT, ALL), "MIN": (dist.ReduceOp.MIN, ALL),
           "BAND": (dist.ReduceOp.BAND, ALL), "BOR": (dist.ReduceOp.BOR, ANY),
           "BXOR": (dist.ReduceOp.BXOR, every.sum(0) % 2 == 1)}
for name, (op, want) in LOGICAL.items():
    t = bools(rank, 40)
    dist.all_reduce(t, op=op)
    same_bool(t, want, f"all_reduce bool {name}")
    w = dist.all_reduce(bools(rank, 40), op=op, async_op=True)
    w.wait()
    same_bool(w.get_future().value()[0], want, f"all_reduce bool {name} async future")
col = torch.stack([bools(rank, 40), torch.zeros(40, dtype=torch.bool)], dim=1)[:, 0]
dist.all_reduce(col, op=dist.ReduceOp.SUM)
same_bool(col, ANY, "all_reduce of a non-contiguous bool column")
bs = [bools(rank, 40), bools(rank, 40)[:7]]
dist.all_reduce_coalesced(bs, op=dist.ReduceOp.MIN)
same_bool(bs[0], ALL, "all_reduce_coalesced bool 0")
same_bool(bs[1], ALL[:7], "all_reduce_coalesced bool 1")
for root in range(n):
    t = bools(rank, 40)
    dist.reduce(t, dst=root, op=dist.ReduceOp.PRODUCT)
    if rank == root:
        same_bool(t, ALL, f"reduce bool PRODUCT to {root}")
    t = bools(rank, 40)
    dist.broadcast(t, src=root)
    same_bool(t, bools(root, 40), f"broadcast bool from {root}")
chunks = [bools(rank, 8 * n)[8 * k:8 * k + 8] for k in range(n)]
out = torch.zeros(8, dtype=torch.bool)
dist.reduce_scatter(out, chunks, op=dist.ReduceOp.MAX)
same_bool(out, torch.stack([bools(r, 8 * n) for r in range(n)]).any(0)[8 * rank:8 * rank + 8],
          "reduce_scatter bool MAX")
out = torch.zeros(8, dtype=torch.bool)
dist.reduce_scatter_tensor(out, bools(rank, 8 * n), op=dist.ReduceOp.MIN)
same_bool(out, torch.stack([bools(r, 8 * n) for r in range(n)]).all(0)[8 * rank:8 * rank + 8],
          "reduce_scatter_tensor bool MIN")
outs = [torch.zeros(6, dtype=torch.bool) for _ in range(n)]
dist.all_gather(outs, bools(rank, 6))
for r in range(n):
    same_bool(outs[r], bools(r, 6), f"all_gather bool slot {r}")
flatb = torch.zeros(6 * n, dtype=torch.bool)
dist.all_gather_into_tensor(flatb, bools(rank, 6))
same_bool(flatb, torch.cat([bools(r, 6) for r in range(n)]), "all_gather_into_tensor bool")
gl = [torch.zeros(6, dtype=torch.bool) for _ in range(n)] if rank == 0 else None
dist.gather(bools(rank, 6), gather_list=gl, dst=0)
if rank == 0:
    for r in range(n):
        same_bool(gl[r], bools(r, 6), f"gather bool slot {r}")
out = torch.zeros(6, dtype=torch.bool)
dist.scatter(out, scatter_list=[bools(r, 6) for r in range(n)] if rank == 0 else None, src=0)
same_bool(out, bools(rank, 6), "scatter bool")
out = torch.zeros(2 * n, dtype=torch.bool)
dist.all_to_all_single(out, bools(rank, 2 * n))
same_bool(out, torch.cat([bools(s, 2 * n)[2 * rank:2 * rank + 2] for s in range(n)]),
          "all_to_all_single bool")
if n > 1:
    if rank == 0:
        dist.send(bools(0, 40), dst=1)
    elif rank == 1:
        got = torch.zeros(40, dtype=torch.bool)
        dist.recv(got, src=0)
        same_bool(got, bools(0, 40), "send/recv bool")

# Clear errors for what weft does not do.
for bad, text in [(lambda: dist.all_reduce(torch.zeros(2, dtype=torch.int16)), "not supported"),
                  (lambda: dist.all_reduce(torch.zeros(2, dtype=torch.bool),
                                           op=dist.ReduceOp.AVG), "not supported for bool"),
                  (lambda: dist.all_reduce(torch.zeros(2), op=dist.ReduceOp.BAND),
                   "integer types only"),
                  (lambda: dist.all_reduce(sparse_input(rank, torch.float32, (5,), 1),
                                           op=dist.ReduceOp.MAX), "only ReduceOp.SUM"),
                  (lambda: dist.broadcast(sparse_input(rank, torch.float32, (5,), 1), src=0),
                   "supported only by all_reduce")]:
    try:
        bad()
        fail("no error for an unsupported call")
    except RuntimeError as e:
        if text not in str(e):
            fail(f"unclear error: {e}")

# Metrics of the group's communicator (docs/observability.md): one more barrier, one more count.
def barriers(text):
    return sum(float(line.rsplit(" ", 1)[1]) for line in text.splitlines()
               if line.startswith("weft_collectives_total{") and 'op="barrier"' in line)


before = barriers(weft.torch.metrics())
dist.barrier()
after = barriers(weft.torch.metrics(dist.group.WORLD))
if after != before + 1:
    fail(f"weft.torch.metrics(): barriers {before} then {after}")
print(f"rank {rank}: torch backend test passed ({checks} checks)", flush=True)
dist.destroy_process_group()
