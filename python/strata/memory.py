"""The tiered memory from Python: configuration, placement, statistics and the occupancy timeline.

Every tensor Strata allocates lives in one process-wide tiered memory: a fast tier (a DRAM arena of
a fixed budget) and a slow tier (PMem/CXL, or a file-backed heap that a model slows down), managed
by an LRU policy (memory/policy.h). Names follow ``torch.cuda.memory_*`` where one applies::

    import strata
    strata.memory.configure(fast_bytes="512M", slow_dir="/mnt/pmem0")   # before the first tensor
    x = strata.zeros(1024, 1024)
    strata.memory.where(x)                   # "fast" or "slow"
    strata.memory.evict(x).wait()            # asynchronous, on the mover thread
    strata.memory.max_memory_allocated("fast")
    with strata.memory.timeline("run.json"):
        strata.memory.mark("forward")
        ...
    strata.memory.save_occupancy_plot("run.png")

**When configuration happens.** The tiered memory is created once, by the first tensor (or the
first call here that needs it: statistics, placement, the timeline), from the ``STRATA_*``
environment variables (``STRATA_FAST_BYTES``, ``STRATA_SLOW_BYTES``, ``STRATA_SLOW_DIR``,
``STRATA_SLOW_BACKEND``, ``STRATA_SLOW_NUMA_NODE``, ``STRATA_SLOW_MODEL``, ``STRATA_DRAM_GBPS``), and
it is never rebuilt: live tensors point into its heaps. :func:`configure` creates it right away
with the given settings (the rest from the environment), so it must be called before the first
tensor; afterwards it raises :class:`strata.StrataError` (a RuntimeError) saying so. ``config()``,
``is_initialized()`` and ``timeline_enabled()`` never create it. With ``STRATA_MEMORY=dram`` tensors
bypass tiering (``where()`` says ``"dram"``).

**The policy.** The LRU policy has no tunable knobs; what a program tells it is per tensor:
:func:`prefetch` (into the fast tier, evicting least-recently-used objects if ``force``),
:func:`evict` (to the slow tier now) and :func:`softevict` (first candidate for eviction, not moved).
Kernels pin their operands, so a tensor in use is never moved (the handle's ``wait()`` then returns
False).
"""

from __future__ import annotations

import contextlib
import json
import os
import tempfile
from typing import Iterator

from ._C import _memory as _m

__all__ = [
    "MoveHandle",
    "capacity",
    "config",
    "configure",
    "evict",
    "in_fast",
    "is_initialized",
    "mark",
    "max_memory_allocated",
    "memory_allocated",
    "memory_summary",
    "prefetch",
    "reset_accumulated_memory_stats",
    "reset_peak_stats",
    "save_occupancy_plot",
    "save_timeline_json",
    "slow_tier_mode",
    "softevict",
    "start_timeline",
    "stats",
    "stats_json",
    "stop_timeline",
    "synchronize",
    "timeline",
    "timeline_enabled",
    "timeline_json",
    "where",
]

MoveHandle = _m.MoveHandle


# ---- configuration ---------------------------------------------------------------------------------

def configure(fast_bytes=None, slow_bytes=None, slow_dir=None, backend=None, model=None, *,
              numa_node=None, dram_gbps=None) -> None:
    """Creates the process-wide tiered memory now, with these settings.

    Settings left ``None`` come from the ``STRATA_*`` environment variables (or their defaults).

    Args:
        fast_bytes: the fast-tier budget: an int or a string like ``"512M"``, ``"8G"`` (K/M/G/T are
            powers of 1024).
        slow_bytes: the slow tier's capacity (same forms).
        slow_dir: an existing directory backing the slow tier (str or os.PathLike).
        backend: ``"auto"``, ``"memkind"``, ``"mmap"`` or ``"numa"``.
        model: the slow-tier model: ``"auto"`` (on unless the slow heap is a real device),
            ``"off"``, ``"default"`` (the dissertation's Optane ratios to the measured DRAM bandwidth),
            ``"read=R,write=W,latency=L"`` or ``{"read": R, "write": W, "latency": L}`` (GB/s, GB/s, ns).
        numa_node: the node of the ``"numa"`` backend.
        dram_gbps: the reference DRAM bandwidth of the default model (skips measuring it).

    Raises:
        TypeError / ValueError: an argument of the wrong type or value (the message names it).
        strata.StrataError: the tiered memory already exists (the first tensor, or an earlier
            ``configure()`` or statistics call created it); configure before the first tensor.
    """
    _m.configure(fast_bytes=fast_bytes, slow_bytes=slow_bytes, slow_dir=slow_dir, backend=backend,
                 numa_node=numa_node, model=model, dram_gbps=dram_gbps)


def is_initialized() -> bool:
    """True once the process-wide tiered memory exists (like ``torch.cuda.is_initialized``)."""
    return _m.is_initialized()


def config() -> dict:
    """The tiered memory's configuration as a dict.

    Keys: ``active`` (False while the tiered memory does not exist yet: the values are then what the
    environment would create), ``allocator`` (``"tiered"``, or ``"dram"`` under STRATA_MEMORY=dram),
    ``policy``, ``fast_bytes``, ``slow_bytes``, ``slow_dir``, ``backend``, ``numa_node``, ``model``,
    ``model_params``, ``dram_gbps``, ``description``.
    """
    return _m.config()


def slow_tier_mode() -> str:
    """What every report must say about the slow tier: a real device, or the model and its figures.

    Resolves the model (the default model measures the DRAM bandwidth once, unless configured)."""
    return _m.slow_tier_mode()


# ---- placement and the policy ----------------------------------------------------------------------

def where(tensor) -> str:
    """Where the tensor's bytes are now: ``"fast"``, ``"slow"``, or ``"dram"`` for memory outside the
    tiered memory (a NumPy buffer, STRATA_MEMORY=dram). Waits for a migration in progress."""
    return _m.where(tensor)


def in_fast(tensor) -> bool:
    """True when the tensor's storage is in the fast tier now."""
    return _m.in_fast(tensor)


def prefetch(tensor, force: bool = True) -> MoveHandle:
    """Queues a move of the tensor's storage into the fast tier (its slow copy is kept, so a later
    eviction of the unchanged tensor needs no copy). With ``force``, least-recently-used objects are
    evicted to make room. Returns a handle: ``wait()`` is True when the tensor ended up fast."""
    return _m.prefetch(tensor, force)


def evict(tensor) -> MoveHandle:
    """Queues a move of the tensor's storage to the slow tier (no copy when the slow copy is
    current). Returns a handle: ``wait()`` is True when the tensor ended up slow."""
    return _m.evict(tensor)


def softevict(tensor) -> None:
    """Makes the tensor the policy's first candidate for eviction, without moving it."""
    _m.softevict(tensor)


def synchronize() -> None:
    """Waits until every queued prefetch/evict has finished."""
    _m.synchronize()


# ---- statistics ------------------------------------------------------------------------------------

def stats() -> dict:
    """Counters of the tiered memory (memory/memory_stats.h) as a dict.

    ``moved_to_slow`` / ``moved_to_fast`` (``{"count", "bytes"}``: copies between the tiers),
    ``copies_elided`` (clean evictions, no copy), ``writebacks_avoided`` (dirty objects freed while
    fast), ``direct_slow_read_bytes`` / ``direct_slow_write_bytes`` (kernels using slow-tier bytes in
    place), ``heaps`` → ``{"fast": {...}, "slow": {...}}`` with ``current_bytes``, ``peak_bytes``,
    ``allocations``, ``frees``, ``capacity_bytes`` (the limit), ``mapped_bytes`` (mapped so far:
    heaps grow on demand), ``name``; ``live_objects``; ``slow_tier_mode``.
    """
    return _m.stats()


def stats_json() -> str:
    """The statistics as the C++ side's JSON (``MemoryStats::to_json``)."""
    return _m.stats_json()


def memory_summary() -> str:
    """A human-readable report of the statistics (like ``torch.cuda.memory_summary``)."""
    return _m.memory_summary()


def memory_allocated(tier: str = "fast") -> int:
    """Bytes in use in ``tier`` (``"fast"`` or ``"slow"``) now."""
    return _m.memory_allocated(tier)


def max_memory_allocated(tier: str = "fast") -> int:
    """The highest bytes in use in ``tier`` since the start or the last :func:`reset_peak_stats`."""
    return _m.max_memory_allocated(tier)


def capacity(tier: str = "fast") -> int:
    """The capacity of ``tier``'s heap in bytes."""
    return _m.capacity(tier)


def reset_peak_stats() -> None:
    """Sets each tier's peak to its current occupancy; other counters are kept."""
    _m.reset_peak_stats()


def reset_accumulated_memory_stats() -> None:
    """Zeroes the event counters (moves, elided copies, allocations, frees, direct accesses) and,
    as the C++ ``MemoryStats::reset`` does, also resets the peaks. Current occupancy is kept."""
    _m.reset_accumulated_memory_stats()


# ---- the occupancy timeline ------------------------------------------------------------------------

def start_timeline(clear: bool = True) -> None:
    """Starts recording the tiers' occupancy over time (every allocation and free is a sample,
    rate-limited and bounded in memory). ``clear`` drops what an earlier recording left."""
    _m.start_timeline(clear)


def stop_timeline() -> None:
    """Stops recording (closing the timeline with the occupancy now); the data stays for saving."""
    _m.stop_timeline()


def timeline_enabled() -> bool:
    """True while a timeline is recording."""
    return _m.timeline_enabled()


def mark(label: str) -> None:
    """Adds a phase mark (``"forward"``, ``"backward"``, ...) with a sample of the occupancy now.
    Does nothing while no timeline is recording."""
    _m.mark(label)


def timeline_json() -> str:
    """The timeline as JSON (the schema of python/strata/memory_plot.py, version 1)."""
    return _m.timeline_json()


def save_timeline_json(path) -> None:
    """Writes the timeline JSON to ``path`` atomically."""
    _m.save_timeline_json(path)


def save_occupancy_plot(path_png, title: str | None = None, dpi: int = 120) -> None:
    """Renders the timeline as a PNG (the picture of the dissertation's Figure 4.6) with
    :mod:`strata.memory_plot` (needs matplotlib)."""
    if not isinstance(path_png, (str, os.PathLike)):
        raise TypeError(f"save_occupancy_plot(): path_png must be a str or os.PathLike, not "
                        f"{type(path_png).__name__}")
    if title is not None and not isinstance(title, str):
        raise TypeError(f"save_occupancy_plot(): title must be a str or None, not {type(title).__name__}")
    if not json.loads(timeline_json())["samples"]:
        raise ValueError("save_occupancy_plot(): the timeline has no samples; record one first with "
                         "strata.memory.start_timeline() or `with strata.memory.timeline():`")
    from . import memory_plot  # imports matplotlib: only when a plot is asked for

    fd, json_path = tempfile.mkstemp(prefix="strata-timeline-", suffix=".json")
    os.close(fd)
    try:
        save_timeline_json(json_path)
        memory_plot.render_png(json_path, path_png, title=title, dpi=dpi)
    finally:
        os.remove(json_path)


@contextlib.contextmanager
def timeline(path_json=None, path_png=None, title: str | None = None) -> Iterator[None]:
    """Records the occupancy timeline inside the ``with`` block; on exit stops it and, when given,
    saves the JSON to ``path_json`` and the plot to ``path_png``. The data stays available to
    :func:`timeline_json`, :func:`save_timeline_json` and :func:`save_occupancy_plot` afterwards."""
    for name, path in (("path_json", path_json), ("path_png", path_png)):
        if path is not None and not isinstance(path, (str, os.PathLike)):
            raise TypeError(f"timeline(): {name} must be a str, os.PathLike or None, not "
                            f"{type(path).__name__}")
    start_timeline()
    try:
        yield
    finally:
        stop_timeline()
    if path_json is not None:
        save_timeline_json(path_json)
    if path_png is not None:
        save_occupancy_plot(path_png, title=title)
