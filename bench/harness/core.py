"""Workload plug-in types and the interleaved runner."""
from __future__ import annotations

import json
import os
import subprocess
import tempfile
from dataclasses import dataclass, field
from typing import Callable, Optional

from .stats import IncompatibleRuns, Pooled, check_compatible


@dataclass(frozen=True)
class Target:
    """A goal for one figure: a Strata/peer time ratio at most `max_ratio`, and/or a fraction of
    the machine limit at least `min_fraction`."""
    text: str
    max_ratio: Optional[float] = None
    min_ratio: Optional[float] = None
    min_fraction: Optional[float] = None


@dataclass
class Figure:
    key: str                      # sample key in a Run, e.g. "fwd"
    label: str                    # what the table calls it
    kind: str = "time"            # "time" (µs, lower is better) or "rate" (unit/s, higher is better)
    unit: str = "µs"
    limit: Optional[str] = None   # machine limit the work rate is compared with (see LIMIT_UNITS)
    target: Optional[Target] = None
    headline: bool = True         # counted in the RESULTS.md summary line (False: e.g. a cold-start figure)


# Machine limits as strata-limits reports them, and the factor to base units per second.
LIMIT_UNITS = {
    "sgemm": ("GFLOP/s", 1e9),
    "stream_copy": ("GB/s", 1e9),
    "stream_triad": ("GB/s", 1e9),
    "gather_64": ("GB/s", 1e9),
    "gather_256": ("GB/s", 1e9),
    "gather_1024": ("GB/s", 1e9),
}


@dataclass
class Run:
    """One side's result of one round: metadata (at least threads and dtype), raw samples per figure
    key, and optionally the work per sample per figure key (FLOPs, bytes) for fractions of limits."""
    meta: dict
    samples: dict
    work: dict = field(default_factory=dict)


@dataclass
class Item:
    """One comparison: a Strata side and a peer side, or a `joint` function that produces both from
    one process that already interleaves them internally (e.g. the copy engine against memcpy)."""
    name: str
    figures: list
    strata: Optional[Callable] = None
    peer: Optional[Callable] = None
    joint: Optional[Callable] = None


@dataclass
class Workload:
    name: str
    title: str
    peer_name: str
    slow_tier: str
    items: Callable            # items(ctx) -> list[Item]
    describe: str = ""
    threads: Optional[int] = None        # overrides --threads (e.g. migration: memcpy has one thread)
    rounds: Optional[int] = None         # overrides --rounds (e.g. limits: each run is already a median)
    warmup: Optional[int] = None         # overrides --warmup
    spread: str = "range"                # the table's spread beside the median: "range" (min–max) or "iqr"


@dataclass
class FigureResult:
    figure: Figure
    strata: Pooled
    peer: Pooled
    work: Optional[float] = None


@dataclass
class ItemResult:
    item: Item
    figures: list
    strata_meta: dict
    peer_meta: dict


class Context:
    """What the workloads get: the thread count, where the binaries are, quick mode, the machine
    limits (measured once per thread count, in this run), a scratch directory and a logger.

    `shared` is what a Strata side leaves for its peer (e.g. the input shapes it ran); it must be
    JSON-serializable, because with `peer_runner` set (compare.py's default) every peer round runs
    in a fresh process that gets a copy of it. Strata's binaries start afresh every round, so a
    peer kept in one long-lived process would sample one process's luck (page placement, cache
    colouring, a warm allocator) against Strata's many."""

    def __init__(self, threads: int, bin_dir: str, quick: bool = False, scratch: Optional[str] = None,
                 log: Callable = print, limits_runner: Optional[Callable] = None,
                 peer_runner: Optional[Callable] = None):
        self.threads = threads
        self.bin_dir = bin_dir
        self.quick = quick
        self.scratch = scratch or tempfile.mkdtemp(prefix="strata-bench-")
        self.log = log
        self._limits = {}
        self._limits_runner = limits_runner or (lambda ctx, t: run_limits(ctx, t))
        self.library = {}
        self.shared = {}
        self.workload = None          # name of the workload being run (set by compare.py)
        self.peer_runner = peer_runner  # peer_runner(ctx, item) -> Run, or None: call item.peer in-process

    def run_peer(self, item: "Item") -> Run:
        if self.peer_runner is None:
            return item.peer(self)
        return self.peer_runner(self, item)

    def with_threads(self, threads: int) -> "Context":
        """The same context at another thread count (sharing the limits measured so far)."""
        c = Context.__new__(Context)
        c.__dict__.update(self.__dict__)
        c.threads = threads
        return c

    def binary(self, name: str) -> str:
        path = os.path.join(self.bin_dir, name)
        if not os.path.exists(path):
            raise FileNotFoundError(f"{path} not found; build it with: bash scripts/build.sh build/release")
        return path

    def limits(self, threads: Optional[int] = None) -> dict:
        t = threads or self.threads
        if t not in self._limits:
            self._limits[t] = self._limits_runner(self, t)
        return self._limits[t]

    def run_json(self, name: str, args: list, tag: str = "run") -> dict:
        """Runs a Strata binary with --json into the scratch directory and returns the parsed JSON.
        The binary's own table goes to the log only on failure."""
        out = os.path.join(self.scratch, f"{name}-{tag}.json")
        cmd = [self.binary(name), *map(str, args), "--json", out]
        p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        if p.returncode != 0:
            raise RuntimeError(f"{' '.join(cmd)} exited {p.returncode}:\n{p.stdout[-3000:]}")
        with open(out) as f:
            data = json.load(f)
        if "library" in data:
            self.library[name] = data["library"]
        return data


def run_to_json(run: Run) -> dict:
    return {"meta": run.meta, "samples": run.samples, "work": run.work}


def run_from_json(d: dict) -> Run:
    return Run(d["meta"], d["samples"], d.get("work", {}))


def run_limits(ctx: Context, threads: int) -> dict:
    """Runs strata-limits at `threads` and returns {name: (best repetition in base units per second, record)}."""
    ctx.log(f"  measuring machine limits at {threads} thread(s) (strata-limits)")
    args = ["--threads", threads] + (["--quick"] if ctx.quick else [])
    data = ctx.run_json("strata-limits", args, tag=f"t{threads}")
    return limits_from_json(data, threads)


def limits_from_json(data: dict, threads: int) -> dict:
    """strata-limits JSON -> {name: (best repetition in base units per second, record)}; refuses a
    run at another thread count or one that misses a limit."""
    if data.get("threads") != threads:
        raise IncompatibleRuns(f"strata-limits ran with {data.get('threads')} threads, asked for {threads}")
    # A limit is the best the machine did (noise on a shared machine only ever slows a run down),
    # the STREAM convention; fractions against it are conservative.
    out = {}
    for name, rec in limit_records(data).items():
        if name in LIMIT_UNITS:
            out[name] = (max(rec["samples"]) * LIMIT_UNITS[name][1], rec)
    missing = [n for n in LIMIT_UNITS if n not in out]
    if missing:
        raise RuntimeError(f"strata-limits did not report {', '.join(missing)}")
    return out


def limit_records(data: dict) -> dict:
    """strata-limits JSON -> {name: record}: every top-level object that carries samples."""
    return {k: v for k, v in data.items() if isinstance(v, dict) and "samples" in v}


def run_item(item: Item, ctx: Context, rounds: int, warmup: int = 1) -> ItemResult:
    """Runs one item: `warmup` discarded rounds, then `rounds` rounds alternating Strata and peer
    (A B A B ...). Every round's metadata must agree between the sides and with the first round."""
    if rounds < 1:
        raise ValueError("rounds must be at least 1")
    pooled = {f.key: (Pooled(), Pooled()) for f in item.figures}
    work = {}
    first = None

    def one_round():
        if item.joint is not None:
            return item.joint(ctx)
        s = item.strata(ctx)
        p = ctx.run_peer(item)
        return s, p

    for _ in range(warmup):
        s, p = one_round()
        check_compatible(s.meta, p.meta, item.name)
    for _ in range(rounds):
        s, p = one_round()
        check_compatible(s.meta, p.meta, item.name)
        if first is None:
            first = (s.meta, p.meta)
        else:
            check_compatible(first[0], s.meta, f"{item.name}, Strata between rounds")
            check_compatible(first[1], p.meta, f"{item.name}, peer between rounds")
        for f in item.figures:
            if f.key not in s.samples or f.key not in p.samples:
                side = "Strata" if f.key not in s.samples else "peer"
                raise KeyError(f"{item.name}: the {side} run has no samples for figure '{f.key}'")
            pooled[f.key][0].add(s.samples[f.key])
            pooled[f.key][1].add(p.samples[f.key])
            if f.key in s.work:
                work[f.key] = s.work[f.key]
    figs = [FigureResult(f, pooled[f.key][0], pooled[f.key][1], work.get(f.key)) for f in item.figures]
    return ItemResult(item, figs, first[0], first[1])
