"""Sparse all_reduce of an embedding gradient: backend "weft" vs "gloo" vs weft's dense allreduce
of the same table, and the crossover between weft's two sparse algorithms, in one job.

Run under a launcher that sets the env:// variables (bench/sparse_compare.sh does this):
    weft run -n 2 /usr/bin/python3 bench/sparse_compare.py [--rows 1M] [--width 64]
        [--density 0.01,0.1] [--crossover 0.05,0.1,...] [--iters 5] [--rounds 3]

Each rank holds `density` of the table's rows (distinct rows, random and unsorted, different on
every rank, as an nn.Embedding(sparse=True) gradient after its lookups), float32. Every
measurement alternates the contenders round by round; a cell is the median over rounds of the
slowest rank's median time per call (each call started by all ranks together). Columns:
  weft: dist.all_reduce of the sparse tensor on backend weft (automatic algorithm);
  gloo: the same on backend gloo;
  dense: dist.all_reduce (weft) of the dense table (rows x width float32);
  gloo/weft and dense/weft: > 1 means weft's sparse all_reduce is faster.
--crossover runs weft's sparse all_reduce with each algorithm forced (WEFT_ALGO_SPARSE_ALLREDUCE
read when a group is created) at each density and prints the share of the table the ranks'
rows add up to (rows per rank x ranks / table rows), the choice sparse_algorithm makes there, and
the faster algorithm.
"""
import argparse
import datetime
import os
import statistics
import time
import warnings

import torch
import torch.distributed as dist

import weft.torch  # noqa: F401

warnings.filterwarnings("ignore")


def parse_count(s):
    units = {"K": 1000, "M": 1000 * 1000}
    return int(float(s[:-1]) * units[s[-1].upper()]) if s[-1].upper() in units else int(s)


def gradient(rank, rows, width, density):
    g = torch.Generator().manual_seed(1000 + rank)
    k = max(1, int(rows * density))
    idx = torch.randperm(rows, generator=g)[:k]
    values = torch.rand(k, width, generator=g)
    return torch.sparse_coo_tensor(idx.unsqueeze(0), values, (rows, width))


def timed(call, make_input, iters, group):
    """The slowest rank's median seconds per call; inputs are made outside the timing, and the
    ranks start each call together. The median, not the mean: on a shared machine one call
    descheduled for a second would otherwise decide a round."""
    call(make_input())  # warm-up
    times = []
    for _ in range(iters):
        x = make_input()
        dist.barrier(group=group)
        t0 = time.perf_counter()
        call(x)
        times.append(time.perf_counter() - t0)
    median = torch.tensor([statistics.median(times)], dtype=torch.float64)
    dist.all_reduce(median, op=dist.ReduceOp.MAX, group=group)
    return median.item()


def weft_group(algo):
    os.environ["WEFT_ALGO_SPARSE_ALLREDUCE"] = algo
    try:
        return dist.new_group(backend="weft")
    finally:
        del os.environ["WEFT_ALGO_SPARSE_ALLREDUCE"]


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--rows", default="1M")
    p.add_argument("--width", type=int, default=64)
    p.add_argument("--density", default="0.01,0.1")
    p.add_argument("--crossover", default="",
                   help="per-rank densities for the gather_merge vs dense sweep (empty: none)")
    p.add_argument("--iters", type=int, default=7)
    p.add_argument("--rounds", type=int, default=3)
    args = p.parse_args()

    dist.init_process_group(backend="weft", timeout=datetime.timedelta(seconds=600))
    torch.set_num_threads(1)
    rank, n = dist.get_rank(), dist.get_world_size()
    rows, width = parse_count(args.rows), args.width
    weft_g, gloo_g = dist.group.WORLD, dist.new_group(backend="gloo")

    def sparse_call(group):
        return lambda x: dist.all_reduce(x, group=group)

    densities = [float(d) for d in args.density.split(",") if d]
    table = torch.rand(rows, width)
    results = {}
    for d in densities:
        grad = gradient(rank, rows, width, d)
        cells = {"weft": [], "gloo": [], "dense": []}
        for _ in range(args.rounds):
            cells["weft"].append(timed(sparse_call(weft_g), grad.clone, args.iters, weft_g))
            cells["gloo"].append(timed(sparse_call(gloo_g), grad.clone, args.iters, gloo_g))
            cells["dense"].append(timed(sparse_call(weft_g), lambda: table, args.iters, weft_g))
        results[d] = {k: statistics.median(v) for k, v in cells.items()}

    cross = []
    if args.crossover:
        groups = {"gather_merge": weft_group("gather_merge"), "dense": weft_group("dense")}
        for d in [float(x) for x in args.crossover.split(",") if x]:
            grad = gradient(rank, rows, width, d)
            cells = {a: [] for a in groups}
            for _ in range(args.rounds):
                for a, g in groups.items():
                    cells[a].append(timed(sparse_call(g), grad.clone, args.iters, g))
            cross.append((d, {a: statistics.median(v) for a, v in cells.items()}))

    if rank == 0:
        load = os.getloadavg()[0]
        print(f"sparse all_reduce (sum) of a {rows} x {width} float32 table, {n} ranks, "
              f"median of {args.rounds} rounds of the median of {args.iters} calls; ms per call; "
              f"{os.cpu_count()} CPUs, load {load:.2f}")
        print(f"{'rows/rank':>10} {'weft ms':>9} {'gloo ms':>9} {'dense ms':>9} "
              f"{'gloo/weft':>10} {'dense/weft':>11}")
        for d, r in results.items():
            print(f"{d:>10.2%} {r['weft'] * 1e3:>9.1f} {r['gloo'] * 1e3:>9.1f} "
                  f"{r['dense'] * 1e3:>9.1f} {r['gloo'] / r['weft']:>10.2f} "
                  f"{r['dense'] / r['weft']:>11.2f}")
        if cross:
            print(f"crossover, {n} ranks: weft sparse all_reduce with each algorithm forced")
            print(f"{'rows/rank':>10} {'sum/table':>10} {'merge ms':>9} {'dense ms':>9} "
                  f"{'faster':>13} {'auto picks':>11}")
            for d, r in cross:
                share = max(1, int(rows * d)) * n / rows
                faster = min(r, key=r.get)
                dense = n >= 3 and share >= 1.5  # sparse_algorithm's rule
                auto = "dense" if dense else "gather_merge"
                print(f"{d:>10.2%} {share:>10.2f} {r['gather_merge'] * 1e3:>9.1f} "
                      f"{r['dense'] * 1e3:>9.1f} {faster:>13} {auto:>11}")
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
