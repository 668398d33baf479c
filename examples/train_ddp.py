"""A real data-parallel PyTorch job for the ANDREAS service: one rank per node of a gang,
gradients averaged by ``torch.distributed`` (DistributedDataParallel over the gloo backend,
so it runs on CPUs too; NCCL where every rank has a GPU).

    # by hand, two ranks on this machine (what the local executor does for a 2-node gang):
    python -m andreas.executors.gang --place n1=0 --place n2=1 -- \\
        python examples/train_ddp.py --epochs 3
    # or submit it with a gang profile (docs/gangs.md):
    andreas submit --nodes 2 --gpus 1 --gpu-type fast --seconds-per-epoch 1 \\
        --epochs 10 --deadline 1h examples/train_ddp.py

The rendezvous comes from the variables every executor sets for a gang (`RANK`,
`WORLD_SIZE`, `MASTER_ADDR`, `MASTER_PORT`: ``init_method="env://"``). Each rank trains on its
own shard of a generated data set (bars of two orientations in noise). Rank 0 writes the
checkpoint after each epoch and reports progress; every rank resumes from it. A pause reaches
every rank as SIGTERM: the ranks agree (an all-reduce of their stop flags) to stop at the same
step, so none waits for a partner that left. Run alone (no `WORLD_SIZE`), it is one rank.
"""

from __future__ import annotations

import argparse
import io
import os
import sys
import time
from datetime import timedelta

import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel

from andreas import job


def make_data(samples: int, seed: int, size: int = 12) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    labels = torch.randint(0, 2, (samples,), generator=g)
    images = 0.5 * torch.randn(samples, size * size, generator=g).view(samples, size, size)
    rows = torch.randint(1, size - 1, (samples,), generator=g)
    horizontal, vertical = (labels == 0).nonzero().flatten(), (labels == 1).nonzero().flatten()
    images[horizontal, rows[horizontal], :] += 2.0
    images[vertical, :, rows[vertical]] += 2.0
    return images.flatten(1), labels


def agreed_stop(stop: bool) -> bool:
    """Whether any rank was asked to stop: all of them stop together."""
    flag = torch.tensor([1 if stop else 0])
    dist.all_reduce(flag, op=dist.ReduceOp.MAX)
    return bool(flag.item())


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--epochs", type=int, default=None, help="default: ANDREAS_EPOCHS")
    parser.add_argument("--samples", type=int, default=8192, help="over all ranks")
    parser.add_argument("--batch", type=int, default=64, help="per rank")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--timeout", type=float, default=120.0,
                        help="seconds a collective waits for a partner")
    args = parser.parse_args()
    epochs = args.epochs if args.epochs is not None else job.epochs()
    torch.set_num_threads(1)
    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")  # run alone: a world of one
    os.environ.setdefault("MASTER_PORT", "29500")
    rank, world = job.rank(), job.world_size()
    backend = "nccl" if torch.cuda.is_available() else "gloo"
    dist.init_process_group(backend, rank=rank, world_size=world,
                            timeout=timedelta(seconds=args.timeout))
    device = torch.device("cuda", 0) if backend == "nccl" else torch.device("cpu")
    torch.manual_seed(args.seed)  # the same initial weights on every rank
    net = nn.Sequential(nn.Linear(144, 64), nn.ReLU(), nn.Linear(64, 2)).to(device)
    optimiser = torch.optim.SGD(net.parameters(), lr=0.05, momentum=0.9)
    start = 0
    saved = job.load_bytes("state.pt")  # rank 0's; every rank resumes from it
    if saved is not None:
        state = torch.load(io.BytesIO(saved), map_location=device)
        net.load_state_dict(state["model"])
        optimiser.load_state_dict(state["optimiser"])
        start = state["epoch"]
    model = DistributedDataParallel(net)
    print(f"rank {rank}/{world} on {os.environ.get('ANDREAS_NODE', 'this machine')} "
          f"(GPUs {os.environ.get('CUDA_VISIBLE_DEVICES', '')!r}) starts at epoch {start}",
          flush=True)
    if saved is not None and job.is_main():
        print(f"resumed from checkpoint at epoch {start}", flush=True)
    images, labels = make_data(args.samples, args.seed)
    mine = torch.arange(rank, args.samples, world)  # this rank's shard
    loss_fn = nn.CrossEntropyLoss()
    for epoch in range(start, epochs):
        tic = time.perf_counter()
        g = torch.Generator().manual_seed(epoch)
        order = mine[torch.randperm(len(mine), generator=g)]
        correct = torch.zeros((), dtype=torch.long)
        for i in range(0, len(order), args.batch):
            if agreed_stop(job.should_stop()):
                if job.is_main():
                    print(f"stop requested during epoch {epoch + 1}; resuming from epoch "
                          f"{epoch}", flush=True)
                dist.destroy_process_group()
                return 0
            idx = order[i:i + args.batch]
            x, y = images[idx].to(device), labels[idx].to(device)
            optimiser.zero_grad()
            out = model(x)
            loss_fn(out, y).backward()  # DDP averages the gradients over the ranks
            optimiser.step()
            correct += (out.argmax(1) == y).sum().cpu()
        dist.all_reduce(correct)
        if job.is_main():
            buffer = io.BytesIO()
            torch.save({"model": net.state_dict(), "optimiser": optimiser.state_dict(),
                        "epoch": epoch + 1}, buffer)
            job.save_bytes("state.pt", buffer.getvalue())
            job.progress(epoch + 1)
            print(f"epoch {epoch + 1} done accuracy={int(correct) / args.samples:.3f} "
                  f"ranks={world} seconds={time.perf_counter() - tic:.3f}", flush=True)
    dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main())
