"""A real training job for the ANDREAS service, with NumPy only: a two-layer MLP trained by
mini-batch SGD on a generated classification task, checkpointed after every epoch.

Run under the service (it sets ANDREAS_* variables), or by hand:

    python examples/train_numpy.py --epochs 5 --samples 20000 --hidden 128

On SIGTERM it stops at the next mini-batch; the partial epoch is dropped and the next start
resumes from the last checkpoint. Each finished epoch is logged as `epoch N done`.
"""

from __future__ import annotations

import argparse
import io
import os
import sys
import time

os.environ.setdefault("OMP_NUM_THREADS", "1")  # one core per job: timings stay predictable
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import numpy as np  # noqa: E402

from andreas import job  # noqa: E402


def make_data(samples: int, features: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(samples, features)).astype(np.float32)
    w = rng.normal(size=(features,))
    y = (np.tanh(x @ w) + 0.3 * rng.normal(size=samples) > 0).astype(np.float32)
    return x, y


def init(features: int, hidden: int, seed: int) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed + 1)
    return {"w1": rng.normal(scale=features ** -0.5, size=(features, hidden)).astype(np.float32),
            "b1": np.zeros(hidden, np.float32),
            "w2": rng.normal(scale=hidden ** -0.5, size=(hidden,)).astype(np.float32),
            "b2": np.zeros(1, np.float32)}


def step(p: dict[str, np.ndarray], x: np.ndarray, y: np.ndarray, lr: float) -> float:
    h = np.maximum(x @ p["w1"] + p["b1"], 0.0)
    logits = np.clip(h @ p["w2"] + p["b2"][0], -30.0, 30.0)  # no overflow, steady timing
    prob = 1.0 / (1.0 + np.exp(-logits))
    loss = float(np.mean(-y * np.log(prob + 1e-7) - (1 - y) * np.log(1 - prob + 1e-7)))
    g = (prob - y) / len(y)
    gh = np.outer(g, p["w2"]) * (h > 0)
    p["w2"] -= lr * (h.T @ g)
    p["b2"] -= lr * g.sum()
    p["w1"] -= lr * (x.T @ gh)
    p["b1"] -= lr * gh.sum(axis=0)
    return loss


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--epochs", type=int, default=None, help="default: ANDREAS_EPOCHS")
    parser.add_argument("--samples", type=int, default=20000)
    parser.add_argument("--features", type=int, default=64)
    parser.add_argument("--hidden", type=int, default=128)
    parser.add_argument("--batch", type=int, default=256)
    parser.add_argument("--lr", type=float, default=0.1)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--hold-after", type=int, default=None, metavar="EPOCH",
                        help="from this epoch on (a restart included), wait after each until "
                             "--hold-file exists (tests that must catch the job mid-run)")
    parser.add_argument("--hold-file", default=None)
    args = parser.parse_args()
    epochs = args.epochs if args.epochs is not None else job.epochs()
    x, y = make_data(args.samples, args.features, args.seed)
    params, start = init(args.features, args.hidden, args.seed), 0
    saved = job.load_bytes("state.npz")
    if saved is not None:
        with np.load(io.BytesIO(saved)) as data:
            params = {k: data[k] for k in params}
            start = int(data["epoch"])
        print(f"resumed from checkpoint at epoch {start}", flush=True)
    for epoch in range(start, epochs):
        tic = time.perf_counter()
        order = np.random.default_rng([args.seed, epoch]).permutation(args.samples)
        losses = []
        for i in range(0, args.samples, args.batch):
            if job.should_stop():
                print(f"stop requested during epoch {epoch + 1}; resuming from epoch {epoch}",
                      flush=True)
                return 0
            batch = order[i:i + args.batch]
            losses.append(step(params, x[batch], y[batch], args.lr))
        buffer = io.BytesIO()
        np.savez(buffer, epoch=epoch + 1, **params)
        job.save_bytes("state.npz", buffer.getvalue())
        job.progress(epoch + 1)
        print(f"epoch {epoch + 1} done loss={np.mean(losses):.4f} "
              f"seconds={time.perf_counter() - tic:.3f}", flush=True)
        if args.hold_after is not None and epoch + 1 >= args.hold_after and args.hold_file:
            while not os.path.exists(args.hold_file):  # a stop request still stops it
                if job.should_stop():
                    print(f"stop requested while held after epoch {epoch + 1}", flush=True)
                    return 0
                time.sleep(0.1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
