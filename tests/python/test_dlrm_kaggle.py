"""The DLRM reference's Kaggle command line (bench/dlrm_s_criteo_kaggle.sh: paths and print
frequency changed only) on a Criteo-format train.txt with a learnable signal: strata-dlrm
preprocesses it, trains one epoch and tests; its final test accuracy is within 1 point of a PyTorch
run of the reference's pipeline on the same file from the same initial weights (one epoch of
SGD leaves about 1.5 points of spread between initial draws) — the reference's preprocessing (per-column
dictionaries in order of first appearance, 7 days, negative dense values clamped, log(x + 1)), its
split (days 0-5 train, the last day's first half test), its `--data-randomize total` order
(np.random.seed(123), then one permutation of the train indices) and its model (REFERENCE.md §1;
bench/workloads/torch_dlrm.py), written here from those descriptions, not from the reference's code.
"""

import pathlib
import re
import subprocess
import sys

import numpy as np
import pytest
import torch

ROOT = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "bench"))

from workloads.torch_dlrm import TorchDLRM  # noqa: E402

DLRM_BIN = ROOT / "build" / "release" / "bench" / "strata-dlrm"
LINES = 70_000
VOCAB = [40, 300, 1000, 25, 600, 8, 150, 70, 3, 900, 500, 1000, 200, 20, 800, 1000, 10, 400, 100, 4, 1000, 12,
         15, 700, 60, 900]
KAGGLE_FLAGS = ("--arch-sparse-feature-size=16 --arch-mlp-bot=13-512-256-64-16 --arch-mlp-top=512-256-1 "
                "--data-generation=dataset --data-set=kaggle --loss-function=bce --round-targets=True "
                "--learning-rate=0.1 --mini-batch-size=128 --print-freq=256 --print-time "
                "--test-mini-batch-size=16384 --test-num-workers=16")


def write_train_txt(path, lines=LINES, seed=5):
    """Clicks from a hidden logistic model: per-value effects in 10 of the 26 columns (Zipf-skewed
    values), two dense features with effects, missing fields and negative integers as in Criteo."""
    rng = np.random.default_rng(seed)
    ids = [(rng.zipf(1.3, size=lines) - 1) % v for v in VOCAB]
    logit = np.full(lines, -1.1)
    for k in range(0, 26, 3)[:10]:
        logit += rng.normal(0.0, 0.9, size=VOCAB[k])[ids[k]]
    dense = np.floor(rng.lognormal(1.0, 1.2, size=(lines, 13))).astype(np.int64)
    dense[:, 1] -= rng.integers(0, 3, size=lines) * (rng.random(lines) < 0.1)
    logit += 0.35 * np.log1p(np.maximum(dense[:, 0], 0)) - 0.25 * np.log1p(np.maximum(dense[:, 4], 0))
    labels = (rng.random(lines) < 1.0 / (1.0 + np.exp(-logit))).astype(np.int64)
    cols = [labels.astype(str)]
    for j in range(13):
        cols.append(np.where(rng.random(lines) < 0.1, "", dense[:, j].astype(str)))
    for k in range(26):
        hashes = ((ids[k].astype(np.uint64) * np.uint64(2654435761) + np.uint64(977 * k + 1)) & np.uint64(0xFFFFFFFF))
        cols.append(np.where(rng.random(lines) < 0.05, "", np.char.mod("%08x", hashes.astype(np.uint32))))
    with open(path, "w") as f:
        f.write("".join("\t".join(r) + "\n" for r in zip(*(c.tolist() for c in cols))))


def reference_pipeline(path, days=7, seed=123):
    """(train, test, counts) as the reference preprocesses and splits the file; train in the
    `--data-randomize total` order."""
    rows = [line.rstrip("\n").split("\t") for line in open(path)]
    y = np.array([int(r[0]) for r in rows], np.int64)
    x_int = np.array([[int(v) if v else 0 for v in r[1:14]] for r in rows], np.int64)
    x_int[x_int < 0] = 0
    x_cat = np.zeros((len(rows), 26), np.int64)
    counts = []
    for k in range(26):
        ids = {}
        for i, r in enumerate(rows):
            v = int(r[14 + k], 16) if r[14 + k] else 0
            x_cat[i, k] = ids.setdefault(v, len(ids))
        counts.append(len(ids))
    per_day = [len(rows) // days + (1 if d < len(rows) % days else 0) for d in range(days)]
    bounds = np.cumsum(per_day)
    np.random.seed(seed)
    train = np.random.permutation(np.arange(bounds[-2]))
    test = np.array_split(np.arange(bounds[-2], bounds[-1]), 2)[0]
    dense = np.log(x_int.astype(np.float32) + 1)
    return (dense[train], x_cat[train], y[train]), (dense[test], x_cat[test], y[test]), counts


def strata_initial_weights(counts):
    """The initial weights strata-dlrm starts from (the same flags and --numpy-rand-seed build the
    same model from Python), so the two runs differ only in how they train, not in their draw."""
    import strata.dlrm
    model = strata.dlrm.DLRM(arch_sparse_feature_size=16, arch_mlp_bot=[13, 512, 256, 64, 16],
                             arch_mlp_top=[512, 256, 1], arch_embedding_size=counts, numpy_rand_seed=123)
    return {k: torch.from_numpy(np.array(v)) for k, v in model.state_dict(tables=True).items()}


def torch_accuracy(train, test, counts, batch=128, lr=0.1):
    model = TorchDLRM(counts, 16, [13, 512, 256, 64, 16], [512, 256, 1], seed=1)
    model.load_state_dict(strata_initial_weights(counts))
    opt = torch.optim.SGD(model.parameters(), lr=lr)
    bce = torch.nn.BCELoss()
    dense, cat, y = train

    def inputs(d, c):
        n = len(d)
        return (torch.from_numpy(d), [torch.from_numpy(c[:, k].copy()) for k in range(26)],
                [torch.arange(n) for _ in range(26)])

    for s in range(0, len(y), batch):
        z = model(*inputs(dense[s:s + batch], cat[s:s + batch]))
        loss = bce(z, torch.from_numpy(y[s:s + batch].astype(np.float32)).view(-1, 1))
        opt.zero_grad()
        loss.backward()
        opt.step()
    with torch.no_grad():
        z = model(*inputs(test[0], test[1])).numpy().ravel()
    return float(np.mean(np.round(z) == test[2]))


@pytest.mark.skipif(not DLRM_BIN.exists(), reason="strata-dlrm is not built (scripts/build.sh build/release)")
def test_kaggle_command_line_learns_as_the_reference_pipeline(tmp_path):
    raw = tmp_path / "train.txt"
    write_train_txt(raw)
    processed = tmp_path / "kaggleAdDisplayChallenge_processed.npz"
    cmd = [str(DLRM_BIN), *KAGGLE_FLAGS.split(), f"--raw-data-file={raw}", f"--processed-data-file={processed}",
           "--threads=2", f"--slow-dir={tmp_path}"]
    run = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stdout + run.stderr
    tests = re.findall(r"^Testing at - (\d+)/(\d+) of epoch 0, loss [0-9.]+, accuracy ([0-9.]+) %", run.stdout, re.M)
    assert tests, run.stdout
    done, nb, strata_acc = tests[-1]
    assert done == nb
    assert processed.exists() and (tmp_path / "train_day_count.npz").exists()

    train, test, counts = reference_pipeline(raw)
    with np.load(processed) as f:  # the processed arrays are the reference's
        assert list(f["counts"]) == counts
    torch_acc = 100.0 * torch_accuracy(train, test, counts)
    base = 100.0 * max(np.mean(test[2]), 1 - np.mean(test[2]))
    print(f"test accuracy: strata {float(strata_acc):.3f} %, torch {torch_acc:.3f} %, majority class {base:.3f} %")
    assert torch_acc > base + 3, "the signal is too weak for the comparison to mean anything"
    assert abs(float(strata_acc) - torch_acc) <= 1.0
