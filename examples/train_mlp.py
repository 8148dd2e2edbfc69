#!/usr/bin/env python3
"""Trains a small classifier from Python with Strata and shows a progress bar with the loss.

The data are synthetic and learnable: for the MLP, Gaussian inputs labelled by a fixed random
linear "teacher" (argmax of its class scores); for the CNN, noisy copies of ten class templates. The same loop in C++ is examples/train_loop.cpp.

    python examples/train_mlp.py [--model mlp|cnn] [--steps N] [--batch B] [--lr LR]
                                 [--optimizer sgd|adam] [--threads T] [--seed S] [--checkpoint FILE]

Exits with status 1 if the final loss is not below half the initial one.
"""
import argparse
import math
import os
import sys
import time

import numpy as np

import strata
import strata.nn as nn
import strata.nn.functional as F


def parse_args(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", choices=["mlp", "cnn"], default="mlp")
    ap.add_argument("--steps", type=int, default=300)
    ap.add_argument("--batch", type=int, default=128)
    ap.add_argument("--lr", type=float, default=None, help="learning rate (default: 0.1 for SGD, 1e-3 for Adam)")
    ap.add_argument("--optimizer", choices=["sgd", "adam"], default="sgd")
    ap.add_argument("--threads", type=int, default=0, help="threads (default: all)")
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--samples", type=int, default=4096, help="training set size")
    ap.add_argument("--checkpoint", default="", help="save model + optimizer here at the end")
    a = ap.parse_args(argv)
    for name in ("steps", "batch", "samples"):
        if getattr(a, name) < 1:
            ap.error(f"--{name} must be at least 1, got {getattr(a, name)}")
    if a.threads < 0:
        ap.error(f"--threads must be positive, got {a.threads}")
    if a.lr is not None and not (a.lr > 0 and math.isfinite(a.lr)):
        ap.error(f"--lr must be a positive number, got {a.lr}")
    return a


def make_data(model, samples, seed):
    """MLP: 64-dimensional Gaussian inputs labelled by a random linear teacher. CNN: 3x16x16 images,
    each a noisy copy of one of 10 random class templates (a linear teacher over pixels would be
    invisible to a network that ends in global average pooling)."""
    rng = np.random.default_rng(seed)
    if model == "mlp":
        x = rng.standard_normal((samples, 64), dtype=np.float32)
        teacher = rng.standard_normal((64, 10)).astype(np.float32)
        return x, (x @ teacher).argmax(1).astype(np.int64)
    templates = rng.standard_normal((10, 3, 16, 16)).astype(np.float32)
    y = rng.integers(0, 10, samples).astype(np.int64)
    x = templates[y] + 0.5 * rng.standard_normal((samples, 3, 16, 16), dtype=np.float32)
    return x, y


def make_model(kind):
    if kind == "mlp":
        return nn.Sequential(nn.Linear(64, 256), nn.ReLU(), nn.Linear(256, 256), nn.ReLU(), nn.Linear(256, 10))
    return nn.Sequential(
        nn.Conv2d(3, 16, 3, padding=1), nn.BatchNorm2d(16), nn.ReLU(), nn.MaxPool2d(2),
        nn.Conv2d(16, 32, 3, padding=1), nn.BatchNorm2d(32), nn.ReLU(), nn.AdaptiveAvgPool2d(1),
        nn.Flatten(), nn.Linear(32, 10))


class Progress:
    """A one-line progress bar with the running loss on a terminal; a line every 10 % otherwise."""

    def __init__(self, total, stream=sys.stderr, width=30):
        self.total, self.stream, self.width = total, stream, width
        self.tty = stream.isatty()
        self.t0 = time.perf_counter()
        self.next_report = 0

    def update(self, step, loss):
        done = step + 1
        rate = done / max(time.perf_counter() - self.t0, 1e-9)
        fill = int(self.width * done / self.total)
        line = (f"[{'#' * fill}{'.' * (self.width - fill)}] step {done}/{self.total} "
                f"loss {loss:.4f} {rate:.0f} steps/s")
        if self.tty:
            self.stream.write("\r" + line + ("\n" if done == self.total else ""))
            self.stream.flush()
        elif done >= self.next_report or done == self.total:
            self.stream.write(line + "\n")
            self.stream.flush()
            self.next_report = done + max(1, self.total // 10)


def main(argv=None):
    a = parse_args(argv)
    if a.threads:
        strata.set_num_threads(a.threads)
    strata.manual_seed(a.seed)
    x_np, y_np = make_data(a.model, a.samples, a.seed)
    x_all, y_all = strata.from_numpy(x_np), strata.from_numpy(y_np)
    model = make_model(a.model)
    lr = a.lr if a.lr is not None else (0.1 if a.optimizer == "sgd" else 1e-3)
    if a.optimizer == "sgd":
        opt = strata.optim.SGD(model.parameters(), lr=lr, momentum=0.9)
    else:
        opt = strata.optim.Adam(model.parameters(), lr=lr)
    print(f"train_mlp.py: {a.model}, {sum(p.numel() for p in model.parameters())} parameters, "
          f"{a.samples} samples, batch {a.batch}, {a.optimizer} lr {lr}, {strata.get_num_threads()} threads",
          flush=True)
    order = np.random.default_rng(a.seed + 1)
    bar = Progress(a.steps)
    first = last = None
    model.train()
    for step in range(a.steps):
        idx = strata.from_numpy(order.integers(0, a.samples, a.batch))
        xb, yb = x_all[idx], y_all[idx]
        opt.zero_grad()
        loss = F.cross_entropy(model(xb), yb)
        loss.backward()
        opt.step()
        last = loss.item()
        first = last if first is None else first
        bar.update(step, last)
    model.eval()
    with strata.no_grad():
        pred = model(x_all).numpy().argmax(1)
    acc = float((pred == y_np).mean())
    print(f"train_mlp.py: loss {first:.4f} -> {last:.4f}, training accuracy {acc * 100:.1f} %", flush=True)
    if a.checkpoint:
        strata.save_checkpoint(a.checkpoint, model, opt, steps=a.steps)
        print(f"train_mlp.py: saved {a.checkpoint}")
    return 0 if last < first / 2 else 1


if __name__ == "__main__":
    sys.exit(main())
