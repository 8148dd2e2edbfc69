"""Tests of the benchmark harness (bench/harness, bench/compare.py): its statistics, the interleaved
runner, the refusal to compare unlike runs, and the reports. No timing is asserted."""
import math
import os
import pathlib
import sys

import pytest

BENCH = pathlib.Path(__file__).resolve().parents[2] / "bench"
sys.path.insert(0, str(BENCH))

from harness import report  # noqa: E402
from harness.core import Context, Figure, Item, Run, Target, run_item  # noqa: E402
from harness.stats import (IncompatibleRuns, Summary, check_compatible, fraction_of_limit,  # noqa: E402
                           median, ratio, summarize)


# ---- statistics -------------------------------------------------------------------------------------

def test_median_odd_and_even():
    assert median([3.0, 1.0, 2.0]) == 2.0
    assert median([4.0, 1.0, 3.0, 2.0]) == 2.5
    assert median([7.0]) == 7.0


def test_summarize_gives_median_min_max_and_count():
    s = summarize([5, 1, 9, 3])
    assert (s.median, s.min, s.max, s.n) == (4.0, 1.0, 9.0, 4)


def test_summarize_gives_the_quartiles_numpy_would():
    import numpy as np
    xs = [5.0, 1.0, 9.0, 3.0, 7.0, 2.0]
    s = summarize(xs)
    assert math.isclose(s.q1, np.percentile(xs, 25)) and math.isclose(s.q3, np.percentile(xs, 75))
    one = summarize([4.0])
    assert one.q1 == one.q3 == 4.0


@pytest.mark.parametrize("bad", [[], [1.0, float("nan")], [float("inf")]])
def test_summarize_refuses_empty_and_non_finite(bad):
    with pytest.raises(ValueError):
        summarize(bad)


def test_ratio_is_strata_over_peer_of_the_medians():
    s, p = Summary(50.0, 40.0, 90.0, 3), Summary(100.0, 10.0, 200.0, 3)
    assert ratio(s, p) == 0.5
    with pytest.raises(ValueError):
        ratio(s, Summary(0.0, 0.0, 0.0, 1))


def test_fraction_of_limit():
    # 2e9 FLOP in 10 ms is 200 GFLOP/s; against a 250 GFLOP/s limit that is 0.8.
    assert math.isclose(fraction_of_limit(2e9, 1e4, 250e9), 0.8)
    with pytest.raises(ValueError):
        fraction_of_limit(1.0, 0.0, 1.0)
    with pytest.raises(ValueError):
        fraction_of_limit(1.0, 1.0, 0.0)


# ---- refusing unlike runs ------------------------------------------------------------------------------

def test_check_compatible_accepts_equal_metadata():
    check_compatible({"threads": 2, "dtype": "f32", "x": 1}, {"threads": 2, "dtype": "f32", "x": 2})


def test_check_compatible_refuses_different_thread_counts():
    with pytest.raises(IncompatibleRuns, match=r"threads.*Strata ran with 2, the peer with 4"):
        check_compatible({"threads": 2, "dtype": "f32"}, {"threads": 4, "dtype": "f32"}, "matmul")


def test_check_compatible_refuses_different_dtypes():
    with pytest.raises(IncompatibleRuns, match=r"dtype.*f32.*f64"):
        check_compatible({"threads": 2, "dtype": "f32"}, {"threads": 2, "dtype": "f64"})


def test_check_compatible_refuses_a_run_that_does_not_say():
    with pytest.raises(IncompatibleRuns, match="peer run does not report 'threads'"):
        check_compatible({"threads": 2, "dtype": "f32"}, {"dtype": "f32"})


# ---- the runner ------------------------------------------------------------------------------------------

def _item(calls, strata_meta=None, peer_meta=None, change_after=None):
    state = {"n": 0}

    def strata(ctx):
        calls.append("S")
        state["n"] += 1
        m = dict(strata_meta or {"threads": 2, "dtype": "f32"})
        if change_after is not None and state["n"] > change_after:
            m["threads"] = 1
        return Run(m, {"t": [10.0 * state["n"], 10.0 * state["n"] + 1]}, {"t": 1e6})

    def peer(ctx):
        calls.append("P")
        return Run(dict(peer_meta or {"threads": 2, "dtype": "f32"}), {"t": [20.0]})

    return Item("fake", [Figure("t", "time", limit="sgemm", target=Target("ratio <= 1.0", max_ratio=1.0))],
                strata=strata, peer=peer)


def _ctx():
    return Context(2, "/nonexistent", limits_runner=lambda ctx, t: {"sgemm": (1e11, {"median": 100.0})})


def test_runner_interleaves_after_warmup_and_pools_every_round():
    calls = []
    res = run_item(_item(calls), _ctx(), rounds=3, warmup=1)
    assert calls == ["S", "P", "S", "P", "S", "P", "S", "P"]
    fr = res.figures[0]
    # The warm-up round (samples 10, 11) is discarded; rounds 2-4 are pooled.
    assert fr.strata.samples == [20.0, 21.0, 30.0, 31.0, 40.0, 41.0]
    assert fr.peer.samples == [20.0, 20.0, 20.0]
    assert fr.work == 1e6


def test_runner_refuses_sides_with_different_threads():
    with pytest.raises(IncompatibleRuns, match="threads"):
        run_item(_item([], peer_meta={"threads": 1, "dtype": "f32"}), _ctx(), rounds=2, warmup=0)


def test_runner_refuses_sides_with_different_dtypes():
    with pytest.raises(IncompatibleRuns, match="dtype"):
        run_item(_item([], peer_meta={"threads": 2, "dtype": "bf16"}), _ctx(), rounds=1, warmup=0)


def test_runner_refuses_a_thread_count_that_changes_between_rounds():
    with pytest.raises(IncompatibleRuns):
        run_item(_item([], change_after=1), _ctx(), rounds=3, warmup=0)


def test_runner_reports_a_missing_figure():
    item = _item([])
    item.figures.append(Figure("other", "other"))
    with pytest.raises(KeyError, match="no samples for figure 'other'"):
        run_item(item, _ctx(), rounds=1, warmup=0)


def test_runner_sends_the_peer_through_the_context_peer_runner():
    calls, routed = [], []
    ctx = _ctx()

    def runner(c, item):
        routed.append(item.name)
        return item.peer(c)

    ctx.peer_runner = runner
    run_item(_item(calls), ctx, rounds=2, warmup=1)
    assert routed == ["fake"] * 3 and calls == ["S", "P"] * 3


def test_context_names_the_missing_binary_and_how_to_build_it(tmp_path):
    ctx = Context(1, str(tmp_path))
    with pytest.raises(FileNotFoundError, match="scripts/build.sh"):
        ctx.binary("strata-limits")


# ---- reports -----------------------------------------------------------------------------------------------

def _rows():
    ctx = _ctx()
    res = run_item(_item([]), ctx, rounds=1, warmup=0)
    return report.rows_of([res], ctx.limits())


def test_rows_carry_ratio_fraction_and_target():
    (r,) = _rows()
    assert r.strata.median == 10.5 and r.peer.median == 20.0
    assert math.isclose(r.ratio, 10.5 / 20.0)
    # 1e6 FLOP in 10.5 µs against 1e11 FLOP/s
    assert math.isclose(r.strata_fraction, 1e6 / 10.5e-6 / 1e11)
    assert r.met is True


def test_rows_mark_a_missed_target_and_the_table_shows_it():
    ctx = _ctx()
    item = _item([])
    item.figures[0].target = Target("ratio <= 0.1", max_ratio=0.1)
    rows = report.rows_of([run_item(item, ctx, rounds=1, warmup=0)], ctx.limits())
    assert rows[0].met is False
    table = report.markdown_table(rows, "PyTorch")
    assert "**no**" in table and "| fake | time (µs) |" in table
    assert "targets met 0/1" in report.headline(rows)


def test_rows_refuse_a_limit_that_was_not_measured():
    ctx = _ctx()
    item = _item([])
    item.figures[0].limit = "stream_copy"
    with pytest.raises(KeyError, match="stream_copy"):
        report.rows_of([run_item(item, ctx, rounds=1, warmup=0)], ctx.limits())


def test_min_fraction_target_needs_the_fraction():
    ctx = _ctx()
    item = _item([])
    item.figures[0].target = Target(">= 0.9 of sgemm", min_fraction=0.9)
    (r,) = report.rows_of([run_item(item, ctx, rounds=1, warmup=0)], ctx.limits())
    assert r.met is (r.strata_fraction >= 0.9)


def test_iqr_table_shows_quartiles_and_the_headline_leaves_out_cold_figures():
    ctx = _ctx()

    def strata(ctx):
        return Run({"threads": 2, "dtype": "f32"}, {"t": [1.0, 2.0, 3.0, 4.0, 5.0], "cold": [900.0]})

    def peer(ctx):
        return Run({"threads": 2, "dtype": "f32"}, {"t": [10.0] * 5, "cold": [100.0]})

    item = Item("op", [Figure("t", "warm"), Figure("cold", "first call", headline=False)], strata=strata, peer=peer)
    rows = report.rows_of([run_item(item, ctx, rounds=1, warmup=0)], ctx.limits())
    table = report.markdown_table(rows, "PyTorch", spread="iqr")
    assert "Strata median [IQR]" in table and "| 3.00 [2.00–4.00] |" in table
    assert "| 3.00 [1.00–5.00] |" in report.markdown_table(rows, "PyTorch")  # the default: min–max
    # only the warm figure (ratio 0.30) counts; the cold one (ratio 9) is in the table, not the headline
    assert "**0.30** over 1 figures" in report.headline(rows)
    with pytest.raises(ValueError, match="spread"):
        report.markdown_table(rows, "PyTorch", spread="stddev")


def test_time_warm_us_warms_for_the_given_time_then_times_between_reps_and_max_reps():
    from workloads.torch_side import time_warm_us
    calls = []
    first, timed, warm = time_warm_us(lambda: calls.append(1), warmup_s=0.02, min_time_s=0.0, reps=3, max_reps=50)
    assert warm >= 2 and len(timed) == 3 and len(calls) == warm + 3 and first > 0
    # a call that takes ~1 ms: the warm-up lasts >= 20 ms, the timed phase >= 10 ms, capped at 12 calls
    import time as _t
    first, timed, warm = time_warm_us(lambda: _t.sleep(0.001), warmup_s=0.02, min_time_s=0.01, reps=2, max_reps=12)
    assert warm >= 2 and warm <= 21 and 2 <= len(timed) <= 12 and (sum(timed) >= 1e4 or len(timed) == 12)


def test_plot_writes_a_png(tmp_path):
    path = tmp_path / "x.png"
    report.plot(_rows(), str(path), "fake", "PyTorch")
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


RESULTS = """# Results

| date (UTC) | benchmark | headline | slow tier |
|---|---|---|---|
| 2026-01-01 | old | old headline | none |

## Old section

old text
"""


def test_results_md_gets_the_newest_row_and_section_first(tmp_path):
    p = tmp_path / "RESULTS.md"
    p.write_text(RESULTS)
    report.update_results_md(str(p), ["| 2026-02-02 | new | new headline | none |"], "## New section\n\nnew text\n")
    lines = p.read_text().split("\n")
    sep = lines.index("|---|---|---|---|")
    assert lines[sep + 1].startswith("| 2026-02-02 | new")
    assert lines[sep + 2].startswith("| 2026-01-01 | old")
    assert lines.index("## New section") < lines.index("## Old section")


def test_results_md_without_a_summary_table_is_an_error(tmp_path):
    p = tmp_path / "RESULTS.md"
    p.write_text("# nothing here\n")
    with pytest.raises(ValueError, match="no summary table"):
        report.update_results_md(str(p), ["| x |"], "## s\n")
    assert p.read_text() == "# nothing here\n"


def test_results_md_is_created_when_missing(tmp_path):
    p = tmp_path / "RESULTS.md"
    report.update_results_md(str(p), ["| 2026-02-02 | new | h | none |"], "## New\n")
    text = p.read_text()
    assert "| 2026-02-02 | new | h | none |" in text and "## New" in text


# ---- the command line ------------------------------------------------------------------------------------------

@pytest.fixture()
def compare():
    import importlib
    return importlib.import_module("compare")


@pytest.mark.parametrize("argv,message", [
    (["bogus"], "unknown workload 'bogus'"),
    (["--threads", "0", "ops"], "--threads must be at least 1"),
    (["--all", "ops"], "either --all or workload names"),
    ([], "name at least one workload"),
    (["ops", "--rounds", "0"], "--rounds must be at least 1"),
])
def test_bad_command_lines_exit_2_with_a_message(compare, capsys, argv, message):
    with pytest.raises(SystemExit) as e:
        compare.parse_args(argv)
    assert e.value.code == 2
    assert message in capsys.readouterr().err


def test_every_workload_loads_and_declares_a_peer(compare):
    import workloads
    for name in workloads.NAMES:
        wl = workloads.load(name)
        assert wl.name == name and wl.peer_name and wl.slow_tier and wl.describe


def _peer_worker(tmp_path, job):
    import json
    import subprocess
    out = tmp_path / "run.json"
    p = subprocess.run([sys.executable, str(BENCH / "compare.py"), "--peer-worker", str(out)],
                       input=json.dumps(job), text=True, capture_output=True, timeout=300)
    return p, (json.loads(out.read_text()) if p.returncode == 0 else None)


def test_peer_worker_runs_one_peer_round_in_a_fresh_process(tmp_path):
    job = {"workload": "ops", "item": "relu/basic", "threads": 1, "quick": True, "bin_dir": "/nonexistent",
           "scratch": str(tmp_path), "shared": {"inputs:relu/basic": [{"shape": [8, 16], "dtype": "f32"}]}}
    p, run = _peer_worker(tmp_path, job)
    assert p.returncode == 0, p.stderr
    assert run["meta"]["threads"] == 1 and run["meta"]["dtype"] == "f32"
    # --quick: 2 timed calls per figure (ops.QUICK_POLICY), and the first call as the cold figure
    assert len(run["samples"]["fwd"]) == 2 and len(run["samples"]["fwd_bwd"]) == 2
    assert len(run["samples"]["fwd_first"]) == 1
    assert all(t > 0 for t in run["samples"]["fwd"] + run["samples"]["fwd_first"])


def test_peer_worker_refuses_an_unknown_item(tmp_path):
    job = {"workload": "ops", "item": "nope/none", "threads": 1, "quick": True, "bin_dir": "/nonexistent",
           "scratch": str(tmp_path), "shared": {}}
    p, _ = _peer_worker(tmp_path, job)
    assert p.returncode != 0 and "has no item 'nope/none'" in p.stderr


# ---- machine limits ------------------------------------------------------------------------------------------

def _limits_json(threads=2):
    from harness.core import LIMIT_UNITS
    d = {"binary": "strata-limits", "threads": threads, "dtype": "f32"}
    for name in LIMIT_UNITS:
        d[name] = {"unit": "GB/s", "samples": [1.0, 4.0, 2.0], "median": 2.0, "min": 1.0, "max": 4.0}
    return d


def test_limits_are_the_best_repetition_in_base_units():
    from harness.core import limits_from_json
    lim = limits_from_json(_limits_json(), 2)
    assert lim["sgemm"][0] == 4.0e9 and lim["gather_64"][0] == 4.0e9


def test_limits_refuse_another_thread_count_and_missing_limits():
    from harness.core import limits_from_json
    with pytest.raises(IncompatibleRuns, match="1 threads, asked for 2"):
        limits_from_json(_limits_json(threads=1), 2)
    d = _limits_json()
    del d["stream_triad"]
    with pytest.raises(RuntimeError, match="stream_triad"):
        limits_from_json(d, 2)
