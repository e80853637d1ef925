"""DDP of a model with nn.Embedding(sparse=True) on backend "weft" and on "gloo" (a second group in
the same job), from the same initial parameters over the same data: DDP all-reduces the
embedding's sparse gradient. After the steps every parameter agrees with gloo's, every rank
holds the same, and the embedding has moved. Run under `weft run -n N`; exits non-zero on failure.
"""
import datetime
import sys

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP

import weft.torch  # noqa: F401

ROWS, DIM, STEPS = 1000, 16, 20


class Model(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = torch.nn.Embedding(ROWS, DIM, sparse=True)
        self.out = torch.nn.Linear(DIM, 4)

    def forward(self, tokens):
        return self.out(self.emb(tokens).mean(1))


def main():
    dist.init_process_group(backend="weft", timeout=datetime.timedelta(seconds=120))
    torch.set_num_threads(1)
    rank = dist.get_rank()
    gloo = dist.new_group(backend="gloo")
    models = {}
    for name, group in (("weft", dist.group.WORLD), ("gloo", gloo)):
        torch.manual_seed(0)
        model = Model()
        models[name] = (model, DDP(model, process_group=group),
                        torch.optim.SGD(model.parameters(), lr=0.5))
    start = models["weft"][0].emb.weight.detach().clone()
    data = torch.Generator().manual_seed(100 + rank)  # each rank its own batches
    sparse_grads = 0
    for _ in range(STEPS):
        tokens = torch.randint(0, ROWS, (8, 6), generator=data)  # repeated rows within a batch
        target = torch.randint(0, 4, (8,), generator=data)
        for name, (model, ddp, opt) in models.items():
            opt.zero_grad()
            F.cross_entropy(ddp(tokens), target).backward()
            sparse_grads += name == "weft" and model.emb.weight.grad.is_sparse
            opt.step()

    ok = sparse_grads == STEPS
    worst = max((a - b).abs().max().item() for a, b in
                zip(models["weft"][0].parameters(), models["gloo"][0].parameters()))
    moved = (models["weft"][0].emb.weight.detach() - start).abs().max().item()
    if rank == 0:
        print(f"{STEPS} steps: largest parameter difference weft vs gloo {worst:.3g}, "
              f"largest embedding change {moved:.3g}", flush=True)
    if worst > 1e-5 or moved < 1e-3:
        print(f"rank {rank}: FAILED: difference {worst}, change {moved}", flush=True)
        ok = False
    flat = torch.cat([p.detach().flatten() for p in models["weft"][0].parameters()])
    rank0 = flat.clone()
    dist.broadcast(rank0, src=0)
    if not torch.equal(flat, rank0):
        print(f"rank {rank}: FAILED: parameters differ from rank 0's", flush=True)
        ok = False
    dist.destroy_process_group()
    print(f"rank {rank}: sparse DDP test {'passed' if ok else 'FAILED'}", flush=True)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
