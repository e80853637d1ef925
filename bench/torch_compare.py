"""torch.distributed all_reduce and DDP training steps, backend "weft" vs "gloo", in one job.

Run under a launcher that sets the env:// variables, e.g. (bench/torch_compare.sh does this):
    weft run -n 2 /usr/bin/python3 bench/torch_compare.py [--min 4] [--max 64M] [--iters 20]

Both process groups live in the same processes (weft is the default group, gloo a second group
over the same ranks) and every size is measured with weft then gloo, alternately, in several
rounds; the table shows the median over rounds of each backend's time (max over ranks of the
mean per call), the bus bandwidth (nccl-tests definition: size / time * 2(n-1)/n) and
weft/gloo ratios (> 1: weft faster).
"""
import argparse
import datetime
import statistics
import time
import warnings

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP

import weft.torch  # noqa: F401

warnings.filterwarnings("ignore")


def parse_size(s):
    units = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
    return int(s[:-1]) * units[s[-1].upper()] if s[-1].upper() in units else int(s)


def timed(fn, iters, warmup, group):
    for _ in range(warmup):
        fn()
    dist.barrier(group=group)
    t0 = time.perf_counter()
    for _ in range(iters):
        fn()
    mean = torch.tensor([(time.perf_counter() - t0) / iters], dtype=torch.float64)
    dist.all_reduce(mean, op=dist.ReduceOp.MAX, group=group)  # the slowest rank's mean
    return mean.item()


def memcpy_gbps():
    """Single-thread copy of 64 MiB (torch's copy_ on one thread), median of 5: the limit line."""
    src, dst = torch.ones(16 << 20), torch.empty(16 << 20)
    dst.copy_(src)
    rates = []
    for _ in range(5):
        t0 = time.perf_counter()
        dst.copy_(src)
        rates.append((64 << 20) / (time.perf_counter() - t0) / 1e9)
    return statistics.median(rates)


def write_tsv(path, n, rounds, sizes, times):
    factor = 2 * (n - 1) / n if n > 1 else 1
    with open(path, "w") as f:
        f.write(f"# title: torch.distributed all_reduce (float32, sum), {n} ranks, median of "
                f"{rounds} rounds, {datetime.date.today()}\n")
        f.write(f"# limit: single-thread copy, 64 MiB={memcpy_gbps():.3f}\n")
        f.write("size\tweft busbw\tweft us\tgloo busbw\tgloo us\n")
        for size in sizes:
            cells = [str(size)]
            for b in ("weft", "gloo"):
                t = statistics.median(times[(b, size)])
                cells += [f"{size / t * factor / 1e9:.6g}", f"{t * 1e6:.6g}"]
            f.write("\t".join(cells) + "\n")


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--min", default="4")
    p.add_argument("--max", default="64M")
    p.add_argument("--factor", type=int, default=4)
    p.add_argument("--iters", type=int, default=20)
    p.add_argument("--warmup", type=int, default=3)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--ddp-steps", type=int, default=30)
    p.add_argument("--tsv", help="also write the all_reduce table there (bench/plot_bench.py "
                                 "draws it)")
    args = p.parse_args()

    dist.init_process_group(backend="weft", timeout=datetime.timedelta(seconds=300))
    torch.set_num_threads(1)
    rank, n = dist.get_rank(), dist.get_world_size()
    groups = {"weft": dist.group.WORLD, "gloo": dist.new_group(backend="gloo")}

    sizes = []
    s = parse_size(args.min)
    while s <= parse_size(args.max):
        sizes.append(s)
        s *= args.factor
    times = {(b, s): [] for b in groups for s in sizes}
    for _ in range(args.rounds):
        for size in sizes:
            t = torch.ones(max(1, size // 4), dtype=torch.float32)
            iters = args.iters if size < (8 << 20) else max(3, args.iters // 4)
            for b, g in groups.items():
                times[(b, size)].append(timed(lambda: dist.all_reduce(t, group=g), iters,
                                              args.warmup, g))

    # DDP training steps: a 4-layer MLP (about 8.4 M parameters, 32 MiB of gradients).
    def step_time(group):
        torch.manual_seed(0)
        model = torch.nn.Sequential(*[torch.nn.Linear(1024, 1024) for _ in range(8)])
        ddp = DDP(model, process_group=group)
        opt = torch.optim.SGD(ddp.parameters(), lr=1e-3)
        x = torch.randn(16, 1024)

        def step():
            opt.zero_grad()
            ddp(x).square().mean().backward()
            opt.step()
        return timed(step, args.ddp_steps, 3, group)
    ddp_times = {b: [] for b in groups}
    for _ in range(args.rounds):
        for b, g in groups.items():
            ddp_times[b].append(step_time(g))

    if rank == 0:
        print(f"torch.distributed all_reduce (float32, sum), {n} ranks, median of {args.rounds} "
              f"rounds; busbw in GB/s")
        print(f"{'size (B)':>12} {'weft us':>10} {'gloo us':>10} {'weft busbw':>11} "
              f"{'gloo busbw':>11} {'weft/gloo':>10}")
        for size in sizes:
            w = statistics.median(times[("weft", size)])
            g = statistics.median(times[("gloo", size)])
            factor = 2 * (n - 1) / n if n > 1 else 1
            print(f"{size:>12} {w * 1e6:>10.1f} {g * 1e6:>10.1f} {size / w * factor / 1e9:>11.3f} "
                  f"{size / g * factor / 1e9:>11.3f} {g / w:>10.2f}")
        if args.tsv:
            write_tsv(args.tsv, n, args.rounds, sizes, times)
        w = statistics.median(ddp_times["weft"])
        g = statistics.median(ddp_times["gloo"])
        print(f"DDP step (8 x Linear(1024, 1024), batch 16): weft {w * 1e3:.1f} ms, "
              f"gloo {g * 1e3:.1f} ms, weft/gloo throughput {g / w:.2f}")
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
