#!/usr/bin/env python3
"""Side-by-side benchmarks: Strata against its peer (PyTorch 2.13 CPU), interleaved A B A B after a
warm-up, at the same thread count pinned to the same CPUs, beside the machine's limits measured in
the same run.

    python bench/compare.py --all                      # every workload, record in bench/RESULTS.md
    python bench/compare.py ops train --threads 2      # some workloads
    python bench/compare.py --list

For each workload it prints and writes bench/results/<workload>.md (median, min–max, ratio
Strata/peer, fraction of the machine limit, target met), bench/results/<workload>.png (the ratios)
and bench/results/<workload>.json (every raw sample), and adds a summary row and a section to
bench/RESULTS.md (newest first) with the exact command, date, thread count and library versions.
Runs made with different thread counts or dtypes are refused, never compared. Every round of
either side runs in a fresh process (Strata's binaries, and a PyTorch worker started as
`compare.py --peer-worker`), so both sides sample process-to-process variance alike;
`--peer-in-process` keeps PyTorch in this process instead (faster, for quick looks).
"""
import argparse
import datetime
import json
import os
import platform
import shlex
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)

from harness import report  # noqa: E402
from harness.core import Context, run_from_json, run_item, run_to_json  # noqa: E402
from harness.stats import IncompatibleRuns  # noqa: E402
import workloads  # noqa: E402

BINARIES = ["strata-limits", "strata-bench-ops", "strata-bench-train", "strata-bench-migration", "strata-bench-remat", "strata-bench-emb", "strata-dlrm", "strata-bench-gpt"]


def parse_args(argv):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__)
    ap.add_argument("workloads", nargs="*", help=f"workloads to run: {', '.join(workloads.NAMES)}")
    ap.add_argument("--all", action="store_true", help="run every workload")
    ap.add_argument("--list", action="store_true", help="list the workloads and exit")
    ap.add_argument("--threads", type=int, default=2, help="threads on both sides (default 2)")
    ap.add_argument("--rounds", type=int, default=3, help="interleaved rounds per item (default 3)")
    ap.add_argument("--warmup", type=int, default=1, help="discarded rounds before timing (default 1)")
    ap.add_argument("--build", default=os.path.join(ROOT, "build", "release"),
                    help="Strata build tree holding bench/ (built or brought up to date first)")
    ap.add_argument("--no-build", action="store_true", help="use the binaries in --build as they are")
    ap.add_argument("--out", default=os.path.join(HERE, "results"), help="directory for tables, plots, raw JSON")
    ap.add_argument("--results-md", default=os.path.join(HERE, "RESULTS.md"))
    ap.add_argument("--no-record", action="store_true", help="do not add to RESULTS.md")
    ap.add_argument("--items", default="", help="comma-separated item names (e.g. ops cases) to run; default all")
    ap.add_argument("--quick", action="store_true", help="tiny sizes and few cases (a smoke test, not figures)")
    ap.add_argument("--peer-in-process", action="store_true",
                    help="run the peer's rounds in this process instead of a fresh process each")
    a = ap.parse_args(argv)
    if a.list:
        return a
    if a.all:
        if a.workloads:
            ap.error("give either --all or workload names, not both")
        a.workloads = list(workloads.NAMES)
    if not a.workloads:
        ap.error("name at least one workload or pass --all (see --list)")
    for w in a.workloads:
        if w not in workloads.NAMES:
            ap.error(f"unknown workload '{w}'; known: {', '.join(workloads.NAMES)}")
    if a.threads < 1:
        ap.error(f"--threads must be at least 1, got {a.threads}")
    if a.rounds < 1 or a.warmup < 0:
        ap.error("--rounds must be at least 1 and --warmup at least 0")
    return a


def pin(threads):
    """Pins this process (PyTorch's side, and every Strata binary it starts) to `threads` CPUs."""
    cpus = sorted(os.sched_getaffinity(0))
    if threads > len(cpus):
        raise SystemExit(f"compare.py: --threads {threads} but only {len(cpus)} CPUs are available")
    chosen = set(cpus[:threads])
    os.sched_setaffinity(0, chosen)
    set_torch_threads(threads)
    return sorted(chosen)


def set_torch_threads(threads):
    import torch
    torch.set_num_threads(threads)
    if torch.get_num_threads() != threads:
        raise SystemExit(f"compare.py: PyTorch runs {torch.get_num_threads()} threads, asked for {threads}")


def peer_in_subprocess(ctx, item):
    """Runs one peer round of `item` in a fresh Python process (compare.py --peer-worker), which
    inherits this process's CPU pinning, and returns its Run."""
    payload = {"workload": ctx.workload, "item": item.name, "threads": ctx.threads, "quick": ctx.quick,
               "bin_dir": ctx.bin_dir, "scratch": ctx.scratch, "shared": ctx.shared}
    fd, out = tempfile.mkstemp(prefix="peer-", suffix=".json", dir=ctx.scratch)
    os.close(fd)
    try:
        p = subprocess.run([sys.executable, os.path.abspath(__file__), "--peer-worker", out],
                           input=json.dumps(payload), text=True, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        if p.returncode != 0:
            raise RuntimeError(f"peer worker for {ctx.workload}/{item.name} exited {p.returncode}:\n{p.stdout[-3000:]}")
        with open(out) as f:
            return run_from_json(json.load(f))
    finally:
        os.unlink(out)


def peer_worker(out_path):
    """The --peer-worker mode: reads {workload, item, threads, quick, bin_dir, scratch, shared} as
    JSON from stdin, runs that item's peer side once and writes its Run as JSON to out_path."""
    job = json.load(sys.stdin)
    set_torch_threads(job["threads"])

    def no_limits(ctx, t):
        raise RuntimeError("a peer worker does not measure machine limits")

    ctx = Context(job["threads"], job["bin_dir"], quick=job["quick"], scratch=job["scratch"],
                  limits_runner=no_limits)
    ctx.workload = job["workload"]
    ctx.shared = job["shared"]
    wl = workloads.load(job["workload"])
    found = [i for i in wl.items(ctx) if i.name == job["item"]]
    if len(found) != 1 or found[0].peer is None:
        raise SystemExit(f"compare.py --peer-worker: {job['workload']} has no item '{job['item']}' with a peer side")
    run = found[0].peer(ctx)
    report.write_atomic(out_path, json.dumps(run_to_json(run)))
    return 0


def ensure_built(build):
    if not os.path.exists(os.path.join(build, "build.ninja")):
        cmd = ["bash", os.path.join(ROOT, "scripts", "build.sh"), build]
    else:
        cmd = ["cmake", "--build", build, "--parallel", str(os.cpu_count() or 2), "--target", *BINARIES]
    print("compare.py: building: " + " ".join(cmd), flush=True)
    subprocess.run(cmd, check=True, cwd=ROOT, stdout=subprocess.DEVNULL)


def environment(threads, cpus):
    import numpy
    import torch
    try:
        rev = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=ROOT,
                               capture_output=True, text=True).stdout.strip()
        rev += " (+ uncommitted changes)" if dirty else ""
    except OSError:
        rev = "unknown"
    cpu = "unknown"
    try:
        with open("/proc/cpuinfo") as f:
            cpu = next(l.split(":", 1)[1].strip() for l in f if l.startswith("model name"))
    except (OSError, StopIteration):
        pass
    return {"date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
            "threads": threads, "cpus": cpus, "git": rev, "cpu": cpu, "ncpu": os.cpu_count(),
            "loadavg": os.getloadavg()[0], "python": platform.python_version(),
            "torch": torch.__version__, "numpy": numpy.__version__}


def limits_lines(limits):
    out = []
    for name, (value, rec) in limits.items():
        unit = rec.get("unit", "GFLOP/s" if name.startswith("sgemm") else "GB/s")
        extra = f" ({rec['source']})" if rec.get("source") else ""
        out.append(f"{name} {value / 1e9:.1f} {unit}{extra}")
    return ", ".join(out)


def run_workload(name, args, ctx, env, command):
    wl = workloads.load(name)
    rounds = wl.rounds if wl.rounds is not None else args.rounds
    warmup = wl.warmup if wl.warmup is not None else args.warmup
    threads = wl.threads or args.threads
    ctx = ctx.with_threads(threads)
    ctx.workload = name
    print(f"\n== {wl.title} ({name}): {threads} thread(s), {rounds} round(s) after {warmup} warm-up ==", flush=True)
    limits = ctx.limits()
    results = []
    items = wl.items(ctx)
    if args.items:
        wanted = [w for w in args.items.split(",") if w]
        unknown = [w for w in wanted if w not in [i.name for i in items]]
        if unknown and len(args.workloads) == 1:
            raise SystemExit(f"compare.py: {name} has no item {', '.join(unknown)}; it has {', '.join(i.name for i in items)}")
        items = [i for i in items if i.name in wanted]
        if not items:
            print("  (no selected items in this workload)")
            return None
    for k, item in enumerate(items):
        t0 = time.time()
        res = run_item(item, ctx, rounds, warmup)
        results.append(res)
        rows = report.rows_of([res], limits)
        desc = "; ".join(f"{r.figure} {r.ratio:.2f}" + ("" if r.met is None else (" ok" if r.met else " MISSED"))
                         for r in rows)
        print(f"  [{k + 1}/{len(items)}] {item.name}: {desc} ({time.time() - t0:.1f} s)", flush=True)
    rows = report.rows_of(results, limits)
    table = report.markdown_table(rows, wl.peer_name, wl.spread)
    libs = sorted(set(ctx.library.values()))
    head = (f"# {wl.title}\n\n{wl.describe.strip()}\n\n"
            f"- command: `{command}`\n- date: {env['date']}; git {env['git']}; {env['cpu']}, {env['ncpu']} CPUs, "
            f"load average {env['loadavg']:.2f} at the start\n"
            f"- threads: {threads} on both sides, pinned to CPUs {env['cpus']}; {rounds} interleaved round(s) "
            f"(Strata, then {wl.peer_name}) after {warmup} warm-up round(s), "
            f"{'the peer in one long-lived process' if ctx.peer_runner is None else 'each side in a fresh process every round'}; "
            f"medians and {'interquartile ranges' if wl.spread == 'iqr' else 'ranges'} over every sample of every round\n"
            f"- Strata: {'; '.join(libs) or 'n/a'}; peer: PyTorch {env['torch']} (numpy {env['numpy']}, Python {env['python']})\n"
            f"- slow tier: {wl.slow_tier}\n"
            f"- machine limits measured in this run ({threads} thread(s), best of each measurement's repetitions): "
            f"{limits_lines(limits)}\n"
            f"- ratio = Strata / {wl.peer_name} of the medians (times: < 1 is faster; rates: > 1 is higher); "
            f"'/ limit' = achieved rate / machine limit\n\n")
    os.makedirs(args.out, exist_ok=True)
    md_path = os.path.join(args.out, f"{name}.md")
    png_path = os.path.join(args.out, f"{name}.png")
    report.write_atomic(md_path, head + table)
    report.plot(rows, png_path, wl.title, wl.peer_name)
    raw = {"workload": name, "env": env, "command": command, "limits": {k: v[1] for k, v in limits.items()},
           "items": [{"item": r.item.name, "strata_meta": r.strata_meta, "peer_meta": r.peer_meta,
                      "figures": [{"key": f.figure.key, "strata": f.strata.samples, "peer": f.peer.samples,
                                   "work": f.work} for f in r.figures]} for r in results]}
    report.write_atomic(os.path.join(args.out, f"{name}.json"), json.dumps(raw, indent=1))
    print("\n" + table, flush=True)
    print(f"compare.py: wrote {md_path} and {png_path}", flush=True)
    return wl, rows, head, table


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["--peer-worker"]:
        if len(argv) != 2:
            raise SystemExit("usage: compare.py --peer-worker OUT.json < job.json")
        return peer_worker(argv[1])
    args = parse_args(argv)
    if args.list:
        for n in workloads.NAMES:
            wl = workloads.load(n)
            print(f"{n:10s} {wl.title}")
        return 0
    command = "python bench/compare.py " + " ".join(shlex.quote(a) for a in argv)
    cpus = pin(args.threads)
    if not args.no_build:
        ensure_built(args.build)
    env = environment(args.threads, cpus)
    ctx = Context(args.threads, os.path.join(args.build, "bench"), quick=args.quick,
                  peer_runner=None if args.peer_in_process else peer_in_subprocess)
    done = []
    try:
        for name in args.workloads:
            r = run_workload(name, args, ctx, env, command)
            if r is not None:
                done.append(r)
    except IncompatibleRuns as e:
        print(f"compare.py: {e}", file=sys.stderr)
        return 3
    if args.no_record or args.quick:
        return 0
    date = env["date"][:10]
    summary, sections = [], []
    for wl, rows, head, table in done:
        title = f"{wl.title} ({env['date']})"
        summary.append(f"| {date} | [{wl.title}](#{report.anchor(title)}) | {report.headline(rows)} | {wl.slow_tier} |")
        rel = os.path.relpath(args.out, os.path.dirname(os.path.abspath(args.results_md)))
        body = head.split("\n", 2)[2]  # without the '# title' line
        sections.append(f"## {title}\n\n{body}{table}\nPlot: [{rel}/{wl.name}.png]({rel}/{wl.name}.png); "
                        f"raw samples: [{rel}/{wl.name}.json]({rel}/{wl.name}.json)\n")
    report.update_results_md(args.results_md, summary, "\n".join(sections))
    print(f"compare.py: added {len(summary)} summary row(s) and section(s) to {args.results_md}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
