#!/usr/bin/env python3
"""Writes a synthetic file in the Criteo Kaggle format (train.txt) for preprocessing benchmarks.

One sample per line: label, 13 integer features, 26 categorical features as 8-hex-digit hashes,
tab-separated. Like the real data: about 26% positives; integers heavy-tailed, a few negative (I2),
some missing (empty); categories drawn Zipf-skewed from vocabularies of the Kaggle sizes (capped at
the line count), some columns often missing. Deterministic for a seed.

    python3 bench/dlrm/make_criteo_tsv.py --lines 2000000 --seed 1 --out /tmp/crit/train.txt
"""

import argparse
import os

import numpy as np

# Distinct values per column in the real Kaggle data (C1..C26).
KAGGLE_VOCAB = [1460, 583, 10131227, 2202608, 305, 24, 12517, 633, 3, 93145, 5683, 8351593, 3194,
                27, 14992, 5461306, 10, 5652, 2173, 4, 7046547, 18, 15, 286181, 105, 142572]
# Share of empty fields per categorical column (a few are often missing in the real data).
CAT_MISSING = [0.0] * 26
for _k, _p in {18: 0.44, 19: 0.44, 21: 0.76, 24: 0.44, 25: 0.44, 2: 0.03, 3: 0.03, 11: 0.03, 15: 0.03}.items():
    CAT_MISSING[_k] = _p
INT_MISSING = [0.45, 0.0, 0.21, 0.22, 0.03, 0.22, 0.04, 0.0, 0.04, 0.45, 0.04, 0.77, 0.22]


def column_hashes(rng, k, vocab, n):
    """n hashes of column k: Zipf(1.1) ranks over `vocab` values, scrambled to 32-bit hashes."""
    ranks = (rng.zipf(1.1, size=n) - 1) % vocab
    h = (ranks.astype(np.uint64) * np.uint64(2654435761) + np.uint64(k * 97531 + 12345)) & np.uint64(0xFFFFFFFF)
    h ^= h >> np.uint64(15)
    h = (h * np.uint64(2246822519)) & np.uint64(0xFFFFFFFF)
    return np.char.mod("%08x", h.astype(np.uint32))


def int_column(rng, j, n):
    v = np.floor(rng.lognormal(mean=1.0 + 0.2 * j, sigma=1.5, size=n)).astype(np.int64)
    if j == 1:  # I2 has small negatives
        v -= rng.integers(0, 4, size=n) * (rng.random(n) < 0.1)
    return v.astype(str)


def chunk_lines(rng, n, vocab):
    cols = [np.where(rng.random(n) < 0.26, "1", "0")]
    for j in range(13):
        s = int_column(rng, j, n)
        cols.append(np.where(rng.random(n) < INT_MISSING[j], "", s))
    for k in range(26):
        s = column_hashes(rng, k, vocab[k], n)
        cols.append(np.where(rng.random(n) < CAT_MISSING[k], "", s))
    rows = zip(*(c.tolist() for c in cols))
    return "".join("\t".join(r) + "\n" for r in rows)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--lines", type=int, default=2_000_000)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--out", required=True)
    ap.add_argument("--chunk", type=int, default=100_000)
    args = ap.parse_args()
    rng = np.random.default_rng(args.seed)
    vocab = [min(v, max(1, args.lines)) for v in KAGGLE_VOCAB]
    os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
    tmp = args.out + ".tmp"
    with open(tmp, "w") as f:
        done = 0
        while done < args.lines:
            n = min(args.chunk, args.lines - done)
            f.write(chunk_lines(rng, n, vocab))
            done += n
    os.replace(tmp, args.out)


if __name__ == "__main__":
    main()
