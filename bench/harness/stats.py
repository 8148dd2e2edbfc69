"""Statistics of the harness: summaries of raw samples, Strata/peer ratios, fractions of a machine
limit, and the compatibility check that refuses to compare unlike runs."""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Iterable, Mapping, Sequence


class IncompatibleRuns(ValueError):
    """Two runs that must not be compared (different thread counts, dtypes, ...)."""


@dataclass(frozen=True)
class Summary:
    median: float
    min: float
    max: float
    n: int
    q1: float = math.nan  # first and third quartiles (the interquartile range, IQR)
    q3: float = math.nan

    def format(self, digits: int = 1) -> str:
        return f"{self.median:.{digits}f} [{self.min:.{digits}f}–{self.max:.{digits}f}]"


def median(samples: Sequence[float]) -> float:
    if not samples:
        raise ValueError("median of no samples")
    s = sorted(samples)
    n = len(s)
    return s[n // 2] if n % 2 else 0.5 * (s[n // 2 - 1] + s[n // 2])


def quartiles(samples: Sequence[float]) -> tuple:
    """(q1, q3) of the samples, linear interpolation between order statistics (numpy's default,
    statistics.quantiles(method="inclusive")); one sample is its own quartiles."""
    if not samples:
        raise ValueError("quartiles of no samples")
    s = sorted(samples)

    def at(q):
        pos = q * (len(s) - 1)
        lo = math.floor(pos)
        hi = min(lo + 1, len(s) - 1)
        return s[lo] + (s[hi] - s[lo]) * (pos - lo)

    return at(0.25), at(0.75)


def summarize(samples: Iterable[float]) -> Summary:
    """Median, min, max and quartiles of raw samples; NaN or infinite samples are an error (a broken timer or
    a figure that was never measured), not something to average over."""
    s = [float(x) for x in samples]
    if not s:
        raise ValueError("no samples to summarize")
    bad = [x for x in s if not math.isfinite(x)]
    if bad:
        raise ValueError(f"non-finite sample(s) {bad[:3]} among {len(s)}")
    return Summary(median(s), min(s), max(s), len(s), *quartiles(s))


def ratio(strata: Summary, peer: Summary) -> float:
    """Strata / peer of the medians. For times, < 1 means Strata is faster; for rates, > 1 does."""
    if peer.median <= 0:
        raise ValueError(f"peer median {peer.median} is not positive")
    return strata.median / peer.median


def rate(work: float, time_us: float) -> float:
    """Work per second (work in units, time in microseconds)."""
    if time_us <= 0:
        raise ValueError(f"time {time_us} µs is not positive")
    return work / (time_us * 1e-6)


def fraction_of_limit(work: float, time_us: float, limit_per_s: float) -> float:
    """Achieved rate (work / time) as a fraction of a measured machine limit (same units per second)."""
    if limit_per_s <= 0:
        raise ValueError(f"limit {limit_per_s} is not positive")
    return rate(work, time_us) / limit_per_s


# Metadata keys that must agree between the two sides of a comparison (and between rounds).
MUST_MATCH = ("threads", "dtype")


def check_compatible(strata_meta: Mapping, peer_meta: Mapping, what: str = "") -> None:
    """Raise IncompatibleRuns unless both runs report the same value for every MUST_MATCH key.
    A missing key is an error too: a run that does not say its thread count cannot be compared."""
    where = f" ({what})" if what else ""
    for key in MUST_MATCH:
        if key not in strata_meta or key not in peer_meta:
            side = "Strata" if key not in strata_meta else "peer"
            raise IncompatibleRuns(f"the {side} run does not report '{key}'{where}; refusing to compare")
        a, b = strata_meta[key], peer_meta[key]
        if a != b:
            raise IncompatibleRuns(
                f"refusing to compare runs with different {key}{where}: Strata ran with {a}, the peer with {b}")


@dataclass
class Pooled:
    """Samples of one figure pooled over rounds, for one side."""
    samples: list = field(default_factory=list)

    def add(self, xs: Iterable[float]) -> None:
        self.samples.extend(float(x) for x in xs)

    def summary(self) -> Summary:
        return summarize(self.samples)
