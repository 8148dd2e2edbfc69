"""Reports: per-figure rows (median, range, ratio, fraction of limit, target), the markdown table,
the PNG plot, and the RESULTS.md summary."""
from __future__ import annotations

import math
import os
import re
from dataclasses import dataclass
from typing import Optional

from .core import LIMIT_UNITS, ItemResult
from .stats import Summary, fraction_of_limit, ratio


@dataclass
class Row:
    item: str
    figure: str
    kind: str
    unit: str
    strata: Summary
    peer: Summary
    ratio: float
    strata_fraction: Optional[float]
    peer_fraction: Optional[float]
    limit: Optional[str]
    target: Optional[str]
    met: Optional[bool]
    headline: bool = True


def rows_of(results: list, limits: dict) -> list:
    """limits: {name: (value in base units per second, record)} measured in the same run."""
    rows = []
    for res in results:
        for fr in res.figures:
            f = fr.figure
            s, p = fr.strata.summary(), fr.peer.summary()
            r = ratio(s, p)
            sf = pf = None
            if f.limit is not None:
                if f.limit not in limits:
                    raise KeyError(f"{res.item.name}/{f.key}: limit '{f.limit}' was not measured")
                lim = limits[f.limit][0]
                if f.kind == "time" and fr.work:
                    sf = fraction_of_limit(fr.work, s.median, lim)
                    pf = fraction_of_limit(fr.work, p.median, lim)
                elif f.kind == "rate":
                    scale = LIMIT_UNITS[f.limit][1]
                    sf, pf = s.median * scale / lim, p.median * scale / lim
            met = None
            if f.target is not None:
                met = True
                if f.target.max_ratio is not None:
                    met = met and r <= f.target.max_ratio
                if f.target.min_ratio is not None:
                    met = met and r >= f.target.min_ratio
                if f.target.min_fraction is not None:
                    met = met and sf is not None and sf >= f.target.min_fraction
            rows.append(Row(res.item.name, f.label, f.kind, f.unit, s, p, r, sf, pf, f.limit,
                            f.target.text if f.target else None, met, f.headline))
    return rows


def _num(x: float) -> str:
    if x == 0 or not math.isfinite(x):
        return f"{x}"
    a = abs(x)
    if a >= 100:
        return f"{x:.0f}"
    if a >= 10:
        return f"{x:.1f}"
    return f"{x:.2f}" if a >= 0.1 else f"{x:.3g}"


def _fmt(s: Summary, spread: str = "range") -> str:
    lo, hi = (s.q1, s.q3) if spread == "iqr" else (s.min, s.max)
    return f"{_num(s.median)} [{_num(lo)}–{_num(hi)}]"


def markdown_table(rows: list, peer_name: str, spread: str = "range") -> str:
    """spread: what the brackets beside each median hold, "range" (min–max) or "iqr" (q1–q3)."""
    if spread not in ("range", "iqr"):
        raise ValueError(f"spread must be 'range' or 'iqr', got {spread!r}")
    sp = "IQR" if spread == "iqr" else "min–max"
    out = [f"| item | figure | Strata median [{sp}] | {peer_name} median [{sp}] | ratio | "
           f"Strata / limit | {peer_name} / limit | target | met |",
           "|---|---|---:|---:|---:|---:|---:|---|---|"]
    for r in rows:
        frac = lambda x: "" if x is None else f"{x:.2f} ({r.limit})" if x is r.strata_fraction else f"{x:.2f}"
        met = "" if r.met is None else ("yes" if r.met else "**no**")
        out.append(f"| {r.item} | {r.figure} ({r.unit}) | {_fmt(r.strata, spread)} | {_fmt(r.peer, spread)} | {r.ratio:.2f} | "
                   f"{frac(r.strata_fraction)} | {frac(r.peer_fraction)} | {r.target or ''} | {met} |")
    return "\n".join(out) + "\n"


def headline(rows: list) -> str:
    """One line: median time ratio, targets met, worst figures against their targets (figures with
    headline=False, e.g. cold starts, are left out)."""
    rows = [r for r in rows if r.headline]
    times = sorted(r.ratio for r in rows if r.kind == "time")
    parts = []
    if times:
        n = len(times)
        med = times[n // 2] if n % 2 else 0.5 * (times[n // 2 - 1] + times[n // 2])
        parts.append(f"median time ratio Strata/peer **{med:.2f}** over {n} figures "
                     f"({sum(1 for t in times if t <= 1.0)} at or below 1.0)")
    rates = [r for r in rows if r.kind == "rate"]
    if rates:
        parts.append("; ".join(f"{r.item} {r.figure} {_num(r.strata.median)} {r.unit} "
                               f"(Strata/peer {r.ratio:.2f})" for r in rates))
    tgt = [r for r in rows if r.met is not None]
    if tgt:
        missed = [r for r in tgt if not r.met]
        parts.append(f"targets met {len(tgt) - len(missed)}/{len(tgt)}" +
                     (": missed " + ", ".join(f"{r.item} {r.figure} {r.ratio:.2f}" +
                                             (f" ({r.strata_fraction:.2f} of {r.limit})" if r.strata_fraction else "")
                                             for r in missed[:6]) if missed else ""))
    return "; ".join(parts)


def plot(rows: list, path: str, title: str, peer_name: str) -> None:
    """Horizontal bars of the Strata/peer ratio per figure (log scale), with the 1.0 line and each
    figure's target ratio marked; written as a PNG."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    labels = [f"{r.item} · {r.figure}" for r in rows]
    vals = [r.ratio for r in rows]
    h = max(2.5, 0.28 * len(rows) + 1.2)
    fig, ax = plt.subplots(figsize=(9, h))
    colors = ["#4c72b0" if (r.met is None or r.met) else "#dd5555" for r in rows]
    y = list(range(len(rows)))[::-1]
    ax.barh(y, vals, color=colors)
    ax.set_yticks(y)
    ax.set_yticklabels(labels, fontsize=7)
    ax.set_xscale("log")
    ax.axvline(1.0, color="black", linewidth=0.8)
    for yi, r in zip(y, rows):
        tr = _target_ratio(r)
        if tr is not None:
            ax.plot([tr, tr], [yi - 0.4, yi + 0.4], color="black", linewidth=1.5)
        ax.text(r.ratio, yi, f" {r.ratio:.2f}", va="center", fontsize=6)
    kinds = {r.kind for r in rows}
    xl = "Strata / " + peer_name + (" (time: < 1 is faster)" if kinds == {"time"} else "")
    ax.set_xlabel(xl)
    ax.set_title(title + "  (red: target missed; tick: target)", fontsize=9)
    fig.tight_layout()
    tmp = path + ".tmp.png"
    fig.savefig(tmp, dpi=110)
    plt.close(fig)
    os.replace(tmp, path)


def _target_ratio(r: Row) -> Optional[float]:
    m = re.search(r"ratio\s*(?:<=|≤)\s*([0-9.]+)", r.target or "")
    return float(m.group(1)) if m else None


def write_atomic(path: str, text: str) -> None:
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        f.write(text)
    os.replace(tmp, path)


SUMMARY_HEADER = "| date (UTC) | benchmark | headline | slow tier |"


def update_results_md(path: str, summary_rows: list, section: str) -> None:
    """Inserts `summary_rows` (markdown table rows) at the top of the summary table, newest first,
    and `section` before the first '## ' section (sections are newest first too). Creates the file
    with the summary table if it does not exist. Written atomically."""
    if os.path.exists(path):
        with open(path) as f:
            text = f.read()
    else:
        text = "# Strata benchmark results\n\nLatest figures first.\n\n" + SUMMARY_HEADER + "\n|---|---|---|---|\n"
    lines = text.split("\n")
    try:
        h = next(i for i, l in enumerate(lines) if l.strip() == SUMMARY_HEADER)
    except StopIteration:
        raise ValueError(f"{path}: no summary table (a line '{SUMMARY_HEADER}')")
    if h + 1 >= len(lines) or not lines[h + 1].startswith("|---"):
        raise ValueError(f"{path}: the summary table header is not followed by its separator")
    lines[h + 2:h + 2] = summary_rows
    sec = next((i for i, l in enumerate(lines) if l.startswith("## ") and i > h), None)
    block = section.rstrip("\n").split("\n") + [""]
    if sec is None:
        lines += [""] + block
    else:
        lines[sec:sec] = block
    write_atomic(path, "\n".join(lines))


def anchor(title: str) -> str:
    """GitHub's heading anchor for a markdown title."""
    a = title.strip().lower()
    a = re.sub(r"[^\w\- ]", "", a)
    return a.replace(" ", "-")
