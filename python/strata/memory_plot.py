"""Plots of tiered-memory heap occupancy over time: the picture of the dissertation's Figure 4.6.

Reads the JSON that the C++ ``OccupancyTimeline::save_json`` writes (memory/memory_stats.h) and
draws the fast (DRAM) and slow (PM/CXL) heaps' occupancy against time, with the heaps' capacities
and phase marks ("forward", "backward", ...). Schema, version 1::

    {"version": 1, "unit": "bytes", "time_unit": "s",
     "fast_capacity": <bytes or null>, "slow_capacity": <bytes or null>,
     "samples": [[t, fast_bytes, slow_bytes], ...],    # t in seconds, non-decreasing
     "marks": [[t, "label"], ...],
     ...}                                              # other keys are ignored

From the shell::

    python -m strata.memory_plot timeline.json occupancy.png [--title TITLE] [--dpi DPI]

From Python: ``render_png("timeline.json", "occupancy.png")``, or ``plot_timeline(load_timeline(p))``
for a matplotlib Figure to adjust further.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
from typing import Any

__all__ = [
    "SCHEMA_VERSION",
    "TimelineFormatError",
    "byte_unit",
    "load_timeline",
    "main",
    "plot_timeline",
    "render_png",
    "validate_timeline",
]

#: The timeline JSON version this module reads.
SCHEMA_VERSION = 1

_FAST_COLOR = "#1f77b4"  # matplotlib's tab:blue
_SLOW_COLOR = "#ff7f0e"  # tab:orange
_MAX_LABELED_MARKS = 40


class TimelineFormatError(ValueError):
    """The timeline JSON is malformed or not the schema this module reads."""


def _is_number(x: Any) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x)


def validate_timeline(data: Any, source: str = "timeline") -> dict:
    """Checks that ``data`` (parsed JSON) is a version-1 occupancy timeline and returns it.

    Raises TimelineFormatError naming ``source``, the offending field and what was expected.
    """

    def fail(what: str) -> None:
        raise TimelineFormatError(f"{source}: {what}")

    if not isinstance(data, dict):
        fail(f"expected a JSON object (an occupancy timeline), got {type(data).__name__}")
    for key in ("version", "unit", "time_unit", "samples", "marks"):
        if key not in data:
            fail(f"missing field '{key}' (is this an OccupancyTimeline JSON?)")
    if data["version"] != SCHEMA_VERSION:
        fail(f"unsupported version {data['version']!r}; this strata.memory_plot reads version "
             f"{SCHEMA_VERSION}")
    if data["unit"] != "bytes":
        fail(f"'unit' must be \"bytes\", got {data['unit']!r}")
    if data["time_unit"] != "s":
        fail(f"'time_unit' must be \"s\", got {data['time_unit']!r}")
    for key in ("fast_capacity", "slow_capacity"):
        value = data.get(key)
        if value is not None and not (_is_number(value) and value >= 0):
            fail(f"'{key}' must be a non-negative number of bytes or null, got {value!r}")

    samples = data["samples"]
    if not isinstance(samples, list):
        fail(f"'samples' must be a list of [t, fast_bytes, slow_bytes], got {type(samples).__name__}")
    previous_t = -math.inf
    for i, sample in enumerate(samples):
        if not (isinstance(sample, list) and len(sample) == 3 and all(_is_number(v) for v in sample)):
            fail(f"samples[{i}] must be [t, fast_bytes, slow_bytes] (three numbers), got {sample!r}")
        t, fast, slow = sample
        if t < 0 or fast < 0 or slow < 0:
            fail(f"samples[{i}] = {sample!r} has a negative value")
        if t < previous_t:
            fail(f"samples[{i}] goes back in time (t = {t} after {previous_t}); times must not "
                 f"decrease")
        previous_t = t

    marks = data["marks"]
    if not isinstance(marks, list):
        fail(f"'marks' must be a list of [t, \"label\"], got {type(marks).__name__}")
    for i, mark in enumerate(marks):
        if not (isinstance(mark, list) and len(mark) == 2 and _is_number(mark[0]) and mark[0] >= 0
                and isinstance(mark[1], str)):
            fail(f"marks[{i}] must be [t, \"label\"] with t >= 0, got {mark!r}")
    return data


def load_timeline(path: str | os.PathLike) -> dict:
    """Reads and validates a timeline JSON file (see the module docstring for the schema)."""
    path = os.fspath(path)
    try:
        with open(path, encoding="utf-8") as f:
            text = f.read()
    except OSError as e:
        raise TimelineFormatError(f"{path}: cannot read the timeline: {e.strerror or e}") from e
    except UnicodeDecodeError as e:
        raise TimelineFormatError(f"{path}: not valid UTF-8 text: {e}") from e
    try:
        data = json.loads(text)
    except json.JSONDecodeError as e:
        raise TimelineFormatError(
            f"{path}: not valid JSON ({e.msg} at line {e.lineno}, column {e.colno})") from e
    return validate_timeline(data, source=path)


def byte_unit(max_bytes: float) -> tuple[str, int]:
    """The unit for an axis whose largest value is ``max_bytes``: ("GiB", 2**30), ("MiB", 2**20),
    ("KiB", 2**10) or ("bytes", 1)."""
    for name, scale in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if max_bytes >= scale:
            return name, scale
    return "bytes", 1


def _time_unit(max_seconds: float) -> tuple[str, float]:
    if max_seconds >= 1 or max_seconds == 0:
        return "s", 1.0
    if max_seconds >= 1e-3:
        return "ms", 1e-3
    return "µs", 1e-6


def _format_bytes(n: float) -> str:
    name, scale = byte_unit(n)
    return f"{n / scale:.1f} {name}" if scale > 1 else f"{n:.0f} bytes"


def _import_figure():
    try:
        from matplotlib.figure import Figure
    except ImportError as e:
        raise ImportError(
            "strata.memory_plot needs matplotlib (>= 3.7): run `bash scripts/bootstrap.sh` in the "
            "Strata source tree, or `pip install 'matplotlib>=3.7'`") from e
    return Figure


def plot_timeline(timeline: dict, title: str | None = None):
    """Draws a validated timeline (see load_timeline) and returns the matplotlib Figure.

    Fast and slow heap occupancy are step curves (occupancy holds between samples), in GiB, MiB,
    KiB or bytes as the data needs; capacities are dashed lines (listed as off scale in the legend
    when far above the data, so that they do not flatten the curves); marks are light vertical
    lines labeled at the top.
    """
    timeline = validate_timeline(timeline)
    samples = timeline["samples"]
    if not samples:
        raise TimelineFormatError(
            "the timeline has no samples, so there is nothing to plot (was it enabled while the "
            "program ran? see OccupancyTimeline::enable)")
    Figure = _import_figure()

    ts = [s[0] for s in samples]
    fast = [s[1] for s in samples]
    slow = [s[2] for s in samples]
    marks = timeline["marks"]
    data_max = max(max(fast), max(slow))
    capacities = [(name, timeline.get(f"{name}_capacity"), color)
                  for name, color in (("fast", _FAST_COLOR), ("slow", _SLOW_COLOR))]
    # A capacity far above the data would squash the curves to the floor; leave it off the axes.
    shown = [(n, c, col) for n, c, col in capacities if c and (data_max == 0 or c <= 3 * data_max)]
    off_scale = [(n, c, col) for n, c, col in capacities if c and (n, c, col) not in shown]
    y_max = max([data_max] + [c for _, c, _ in shown]) or 1
    unit, scale = byte_unit(y_max)
    t_max = max(ts[-1], max((m[0] for m in marks), default=0))
    t_unit, t_scale = _time_unit(t_max)

    fig = Figure(figsize=(9, 4.8), dpi=120, layout="constrained")
    ax = fig.add_subplot()
    x = [t / t_scale for t in ts]
    for name, values, color in (("fast heap (DRAM)", fast, _FAST_COLOR),
                                ("slow heap (PM)", slow, _SLOW_COLOR)):
        y = [v / scale for v in values]
        ax.step(x, y, where="post", color=color, linewidth=1.8, label=name)
        ax.fill_between(x, y, step="post", color=color, alpha=0.12, linewidth=0)
    for name, capacity, color in shown:
        ax.axhline(capacity / scale, color=color, linestyle="--", linewidth=1.2,
                   label=f"{name} capacity ({_format_bytes(capacity)})")
    for name, capacity, color in off_scale:
        ax.plot([], [], color=color, linestyle="--", linewidth=1.2,
                label=f"{name} capacity ({_format_bytes(capacity)}, off scale)")

    # Phase marks: every one drawn; labels only where readable (all of them when few, otherwise
    # only where the label changes, i.e. at phase boundaries).
    labeled = marks if len(marks) <= _MAX_LABELED_MARKS else [
        m for i, m in enumerate(marks) if i == 0 or m[1] != marks[i - 1][1]]
    if len(labeled) > _MAX_LABELED_MARKS:
        labeled = []
    for t, _ in marks:
        ax.axvline(t / t_scale, color="0.55", linewidth=0.8, alpha=0.45, zorder=0)
    x_max = (t_max / t_scale) or 1
    for t, label in labeled:
        # Right of the line, except near the right edge where the text would leave the axes.
        near_end = t / t_scale > 0.94 * x_max
        ax.text(t / t_scale, 0.98, label, transform=ax.get_xaxis_transform(), rotation=90,
                va="top", ha="right" if near_end else "left", fontsize=7, color="0.3",
                clip_on=True, bbox=dict(boxstyle="square,pad=0.15", facecolor="white", alpha=0.75,
                                        edgecolor="none"))

    ax.set_xlim(0, x_max)
    ax.set_ylim(0, y_max / scale * 1.08)
    ax.set_xlabel(f"time ({t_unit})")
    ax.set_ylabel(f"heap occupancy ({unit})")
    ax.set_title(title if title is not None else "Heap occupancy over time")
    ax.grid(True, color="0.9", linewidth=0.6)
    ax.set_axisbelow(True)
    # Below the axes, so that it never hides a curve.
    fig.legend(loc="outside lower center", ncols=2 + len(shown) + len(off_scale), fontsize=8,
               frameon=False)
    dropped = timeline.get("dropped_samples")
    if _is_number(dropped) and dropped > 0:
        fig.text(0.995, 0.995, f"{len(samples)} samples shown ({int(dropped)} dropped by "
                 f"downsampling)", ha="right", va="top", fontsize=6, color="0.5")
    return fig


def render_png(json_path: str | os.PathLike, png_path: str | os.PathLike,
               title: str | None = None, dpi: int = 120) -> None:
    """Reads the timeline at ``json_path`` and writes its plot to ``png_path`` atomically (via
    ``png_path + ".tmp"`` and a rename, so a failure never leaves a partial PNG)."""
    if not (isinstance(dpi, int) and 10 <= dpi <= 1200):
        raise ValueError(f"dpi must be an integer in [10, 1200], got {dpi!r}")
    fig = plot_timeline(load_timeline(json_path), title=title)
    png_path = os.fspath(png_path)
    tmp = png_path + ".tmp"
    try:
        fig.savefig(tmp, format="png", dpi=dpi)
        os.replace(tmp, png_path)
    except BaseException:
        try:
            os.remove(tmp)
        except OSError:
            pass
        raise


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m strata.memory_plot",
        description="Render a Strata occupancy timeline JSON (OccupancyTimeline::save_json) as a "
                    "PNG of heap occupancy over time.")
    parser.add_argument("timeline", help="the timeline JSON file")
    parser.add_argument("png", help="the PNG file to write")
    parser.add_argument("--title", default=None, help="plot title (default: 'Heap occupancy over time')")
    parser.add_argument("--dpi", type=int, default=120, help="resolution (default: 120)")
    args = parser.parse_args(argv)
    try:
        render_png(args.timeline, args.png, title=args.title, dpi=args.dpi)
    except (TimelineFormatError, ValueError, ImportError) as e:
        print(f"{parser.prog}: error: {e}", file=sys.stderr)
        return 1
    except OSError as e:
        print(f"{parser.prog}: error: cannot write '{args.png}': {e.strerror or e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
