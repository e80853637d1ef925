"""Data-parallel training with torch DistributedDataParallel over weft.

    weft run -n 4 /usr/bin/python3 examples/torch_ddp.py            # backend "weft"
    weft run -n 4 /usr/bin/python3 examples/torch_ddp.py --compare  # weft and gloo side by side
    torchrun --nproc_per_node 4 examples/torch_ddp.py               # under torchrun

Each rank trains the same small MLP on its own shard of a synthetic regression problem;
DDP averages the gradients with the process group's allreduce. The only change from a gloo
script is `import weft.torch` and backend="weft". With --compare, a second copy of the model
trains on a gloo group over the same data, and at the end the two copies' parameters must agree
to floating-point tolerance (exit status 1 if not, or if the loss did not fall).
"""
import argparse
import datetime
import os
import sys
import time
import warnings

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP

import weft.torch  # noqa: F401  registers backend "weft"

warnings.filterwarnings("ignore", message=".*deprecated.*")


def make_model(width):
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(32, width), torch.nn.Tanh(),
                               torch.nn.Linear(width, width), torch.nn.Tanh(),
                               torch.nn.Linear(width, 1))


def batch(rank, step, size):
    g = torch.Generator().manual_seed(1000 * step + rank)
    x = torch.randn(size, 32, generator=g)
    y = (x[:, :4].sum(1, keepdim=True) * 0.5).sin() + 0.1 * x[:, 4:5]
    return x, y


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--backend", default="weft")
    p.add_argument("--steps", type=int, default=200)
    p.add_argument("--width", type=int, default=256)
    p.add_argument("--batch", type=int, default=64)
    p.add_argument("--compare", action="store_true", help="also train on a gloo group and "
                   "check that both copies end with the same parameters")
    args = p.parse_args()

    dist.init_process_group(backend=args.backend, timeout=datetime.timedelta(seconds=120))
    rank, n = dist.get_rank(), dist.get_world_size()
    torch.set_num_threads(1)  # ranks share the machine's cores

    models = {args.backend: DDP(make_model(args.width))}
    if args.compare:
        models["gloo"] = DDP(make_model(args.width), process_group=dist.new_group(backend="gloo"))
    opts = {k: torch.optim.SGD(m.parameters(), lr=0.05) for k, m in models.items()}
    params = sum(t.numel() for t in models[args.backend].parameters())
    if rank == 0:
        print(f"{n} ranks, {params} parameters, backend {args.backend}"
              f"{' vs gloo' if args.compare else ''}, {args.steps} steps", flush=True)

    losses = {k: [] for k in models}
    last = {}
    times = {k: 0.0 for k in models}
    for step in range(args.steps):
        x, y = batch(rank, step, args.batch)
        for k, m in models.items():
            t0 = time.perf_counter()
            opts[k].zero_grad()
            loss = torch.nn.functional.mse_loss(m(x), y)
            loss.backward()  # DDP allreduces the gradients here
            opts[k].step()
            times[k] += time.perf_counter() - t0
            losses[k].append(loss.item())
            last[k] = loss.item()
        if rank == 0 and (step % max(1, args.steps // 10) == 0 or step == args.steps - 1):
            print(f"step {step:4d}  " + "  ".join(f"{k} loss {last[k]:.4f}" for k in models),
                  flush=True)

    ok = True
    window = max(1, min(10, args.steps // 4))
    first = {k: sum(v[:window]) / window for k, v in losses.items()}
    final = {k: sum(v[-window:]) / window for k, v in losses.items()}
    if rank == 0:
        for k in models:
            print(f"{k}: mean loss of the first/last {window} steps {first[k]:.4f} -> "
                  f"{final[k]:.4f}, {1e3 * times[k] / args.steps:.2f} ms/step", flush=True)
    for k in models:
        if not final[k] < 0.5 * first[k]:
            print(f"rank {rank}: {k}: the loss did not fall enough", flush=True)
            ok = False
    if args.compare:
        worst = max((a - b).abs().max().item() for a, b in
                    zip(models[args.backend].parameters(), models["gloo"].parameters()))
        if rank == 0:
            print(f"largest parameter difference {args.backend} vs gloo: {worst:.3g}", flush=True)
        if worst > 1e-4:
            print(f"rank {rank}: parameters differ from gloo's by {worst}", flush=True)
            ok = False
    # Every rank must hold the same parameters.
    flat = torch.cat([t.detach().flatten() for t in models[args.backend].parameters()])
    mine = flat.clone()
    dist.broadcast(flat, src=0)
    if not torch.equal(flat, mine):
        print(f"rank {rank}: parameters differ from rank 0's", flush=True)
        ok = False
    dist.destroy_process_group()
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
