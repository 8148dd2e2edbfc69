"""Tier migration bandwidth: Strata's copy engine (memory/copy_engine, non-temporal stores to the
slow tier) against std::memcpy on the same buffers, fast->slow and slow->fast, 16-256 MiB, with the
slow-tier model off (with the model on, the engine is throttled to the modeled Optane bandwidth by
design and memcpy is not, so that is no comparison; `strata-bench-migration --model default` reports
how closely migrations follow the model). Both sides run in one process
(strata-bench-migration), interleaved A B A B after a warm-up, at 1 thread because memcpy is
single-threaded. The fraction of the limit counts bytes read + written (the STREAM convention)
against the 1-thread STREAM copy bandwidth."""
from harness.core import Figure, Item, Run, Workload


def _mib(n):
    return f"{n // (1 << 20)} MiB"


def items(ctx):
    args = ["--threads", ctx.threads, "--dir", ctx.scratch, "--model", "off"]
    args += ["--quick"] if ctx.quick else ["--min-mib", 16, "--max-mib", 256, "--reps", 5]
    # The figures are known once the binary has run; a first (discarded) run lists them.
    probe = ctx.run_json("strata-bench-migration", args, tag="probe")
    figs = [Figure(_key(r), f"{r['direction']} {_mib(r['bytes'])} (model {r['model']})", limit="stream_copy")
            for r in probe["records"]]

    def joint(c):
        data = c.run_json("strata-bench-migration", args, tag="round")
        sm = {"threads": data["threads"], "dtype": data["dtype"], "library": data.get("library", "")}
        pm = {"threads": data["params"]["memcpy_threads"], "dtype": data["dtype"], "library": "std::memcpy"}
        s = {_key(r): r["strata_us"]["samples"] for r in data["records"]}
        p = {_key(r): r["memcpy_us"]["samples"] for r in data["records"]}
        work = {_key(r): 2.0 * r["bytes"] for r in data["records"]}
        return Run(sm, s, work), Run(pm, p)

    return [Item("copy engine vs memcpy", figs, joint=joint)]


def _key(r):
    return f"{r['model']}:{r['direction']}:{r['bytes']}"


WORKLOAD = Workload(
    name="migration",
    title="Tier migration bandwidth vs memcpy",
    peer_name="memcpy",
    slow_tier="file-backed mmap on the scratch directory's file system (page cache), model off",
    items=items,
    describe=__doc__,
    threads=1,
    rounds=1,
    warmup=0,
)
