"""An installed weft used from Python, as a user would after `cmake --install` or `apt install`:
under `weft run -n N` the numpy module (weft.init()) allreduces; with --torch, torch.distributed
with backend "weft" (under torchrun or weft run) all_reduces a float and a bool tensor. Prints
where the package was imported from; exits non-zero on a wrong result."""
import sys

import numpy as np

import weft

if "--torch" in sys.argv:
    import torch
    import torch.distributed as dist

    import weft.torch  # noqa: F401  registers the backend

    dist.init_process_group(backend="weft")
    rank, n = dist.get_rank(), dist.get_world_size()
    t = torch.full((4,), float(rank + 1))
    dist.all_reduce(t)
    b = torch.tensor([rank == 0, True])
    dist.all_reduce(b)  # logical or
    ok = torch.equal(t, torch.full((4,), n * (n + 1) / 2)) and bool(b.all())
    dist.destroy_process_group()
    what = "torch"
else:
    comm = weft.init()
    rank, n = comm.rank, comm.size
    x = np.full(4, rank + 1, np.int64)
    comm.allreduce(x)
    ok = bool((x == n * (n + 1) // 2).all())
    what = "numpy"
print(f"rank {rank}: weft {weft.__version__} from {weft.__file__}: {what} allreduce "
      f"{'ok' if ok else 'WRONG'}", flush=True)
sys.exit(0 if ok else 1)
