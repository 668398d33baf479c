"""A real PyTorch training job for the ANDREAS service (CPU or GPU): a small convolutional
network learning to classify generated images (bars of two orientations in noise),
checkpointed after every epoch with `torch.save`. `--width` and `--image` size the network and
the images, so that the same script can keep a large GPU busy (`andreas validate --gpu`).

    python examples/train_pytorch.py --epochs 3           # by hand
    # or submit it: {"script": "examples/train_pytorch.py", "epochs": 10, ...}

It uses the GPUs in CUDA_VISIBLE_DEVICES when there are any (DataParallel over several), the
CPU otherwise. On SIGTERM it stops at the next step and resumes from the last checkpoint.
"""

from __future__ import annotations

import argparse
import io
import sys
import time

import torch
from torch import nn

from andreas import job


def make_data(samples: int, seed: int, size: int = 16) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    labels = torch.randint(0, 2, (samples,), generator=g)
    images = 0.5 * torch.randn(samples, 1, size, size, generator=g)
    rows = torch.randint(2, size - 2, (samples,), generator=g)
    horizontal, vertical = (labels == 0).nonzero().flatten(), (labels == 1).nonzero().flatten()
    images[horizontal, 0, rows[horizontal], :] += 2.0  # a bright bar: label 0 horizontal,
    images[vertical, 0, :, rows[vertical]] += 2.0  # label 1 vertical
    return images, labels


def model(width: int = 8, size: int = 16) -> nn.Module:
    return nn.Sequential(nn.Conv2d(1, width, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
                         nn.Conv2d(width, 2 * width, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
                         nn.Flatten(), nn.Linear(2 * width * (size // 4) ** 2, 2))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--epochs", type=int, default=None, help="default: ANDREAS_EPOCHS")
    parser.add_argument("--samples", type=int, default=4096)
    parser.add_argument("--batch", type=int, default=128)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--width", type=int, default=8, help="channels of the first layer")
    parser.add_argument("--image", type=int, default=16, help="image side, a multiple of 4")
    args = parser.parse_args()
    epochs = args.epochs if args.epochs is not None else job.epochs()
    torch.manual_seed(args.seed)
    torch.set_num_threads(1)
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    net = model(args.width, args.image)
    if torch.cuda.device_count() > 1:
        net = nn.DataParallel(net)
    net.to(device)
    optimiser = torch.optim.SGD(net.parameters(), lr=0.05, momentum=0.9)
    images, labels = make_data(args.samples, args.seed, args.image)
    if device.type == "cuda":  # the whole (small) data set lives on the GPU
        images, labels = images.to(device), labels.to(device)
    start = 0
    saved = job.load_bytes("state.pt")
    if saved is not None:
        state = torch.load(io.BytesIO(saved), map_location=device)
        net.load_state_dict(state["model"])
        optimiser.load_state_dict(state["optimiser"])
        start = state["epoch"]
        print(f"resumed from checkpoint at epoch {start}", flush=True)
    loss_fn = nn.CrossEntropyLoss()
    for epoch in range(start, epochs):
        tic = time.perf_counter()
        order = torch.randperm(args.samples, generator=torch.Generator().manual_seed(epoch))
        order = order.to(images.device)
        correct = torch.zeros((), dtype=torch.long, device=device)  # no sync per step
        for i in range(0, args.samples, args.batch):
            if job.should_stop():
                print(f"stop requested during epoch {epoch + 1}; resuming from epoch {epoch}",
                      flush=True)
                return 0
            idx = order[i:i + args.batch]
            x, y = images[idx].to(device), labels[idx].to(device)
            optimiser.zero_grad()
            out = net(x)
            loss = loss_fn(out, y)
            loss.backward()
            optimiser.step()
            correct += (out.argmax(1) == y).sum()
        buffer = io.BytesIO()
        torch.save({"model": net.state_dict(), "optimiser": optimiser.state_dict(),
                    "epoch": epoch + 1}, buffer)
        job.save_bytes("state.pt", buffer.getvalue())
        job.progress(epoch + 1)
        print(f"epoch {epoch + 1} done accuracy={int(correct) / args.samples:.3f} "
              f"seconds={time.perf_counter() - tic:.3f}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
