"""Checks strata-netmodel --validate's report against the strata-dlrm runs it read: one record and
one table row per run, in order; the measured figures are the runs' (rank 0's step-time median and
mean, the most blocked rank, rank 0's allreduce busy time, per step); compute is the busiest rank's
phase sum; the ratios, exposed time and worker share follow from the rest.
Usage: check_validate.py REPORT.json REPORT.md RUN.json..."""
import json
import statistics
import sys

PHASES = ["other", "lookup_remote", "lookup", "bottom_mlp", "interaction", "top_mlp", "backward",
          "sparse_update", "dense_optimizer"]


def close(a, b, what):
    assert abs(a - b) <= 1e-9 * max(1.0, abs(a), abs(b)), f"{what}: {a} != {b}"


def check_record(rec, run, path, cores):
    steps = run["iterations"]
    ms = run["step_ms"]["samples"]
    assert rec["run"] == path and rec["ranks"] == run["world_size"] and rec["threads_per_rank"] == run["threads"], rec
    close(rec["measured_median_s"], statistics.median(ms) * 1e-3, "median")
    close(rec["measured_mean_s"], sum(ms) / len(ms) * 1e-3, "mean")
    compute = max(sum(r["phases_s"][p] for p in PHASES) / steps for r in run["ranks"])
    close(rec["compute_s"], compute, "compute")
    close(rec["measured_blocked_s"], max(r["phases_s"]["waited"] for r in run["ranks"]) / steps, "blocked")
    close(rec["measured_allreduce_busy_s"], run["ranks"][0]["collectives"]["allreduce"]["busy_s"] / steps, "busy")
    close(rec["ratio_median"], rec["model_step_s"] / rec["measured_median_s"], "ratio to the median")
    close(rec["ratio_mean"], rec["model_step_s"] / rec["measured_mean_s"], "ratio to the mean")
    close(rec["exposed_s"], rec["model_step_s"] - rec["compute_s"], "exposed")
    close(rec["worker_share"], min(1.0, cores / (run["world_size"] * (run["threads"] + 1))), "worker share")
    assert rec["model_step_s"] >= rec["compute_s"] > 0, rec
    assert 0 <= rec["allreduce_local_s"] <= rec["allreduce_s"], rec
    if run["world_size"] == 1:  # one process: no messages; its allreduce busy time fits the host rate
        assert rec["check_s"] == rec["forward_a2a_s"] == rec["gather_s"] == rec["backward_a2a_s"] == 0, rec
        close(rec["allreduce_s"], rec["measured_allreduce_busy_s"], "the 1-rank allreduce at its own rate")
    else:
        assert rec["fabric_fitted_at_ranks"] == 2 and min(rec["forward_a2a_s"], rec["gather_s"]) > 0, rec


def main():
    report = json.load(open(sys.argv[1]))
    table = open(sys.argv[2]).read().splitlines()
    paths = sys.argv[3:]
    for k in ("binary", "mode", "cores", "host_bytes_per_second", "host_rate_from", "records"):
        assert k in report, "missing " + k
    assert report["mode"] == "validate" and report["host_rate_from"] == paths[0], report
    assert report["host_bytes_per_second"] > 0, report
    assert len(report["records"]) == len(paths), report["records"]
    rows = [line for line in table if line.startswith("| /")]
    assert len(rows) == len(paths), table
    for rec, path, row in zip(report["records"], paths, rows):
        check_record(rec, json.load(open(path)), path, report["cores"])
        cells = [c.strip() for c in row.strip("|").split("|")]
        assert cells[0] == path and cells[1] == f"{rec['ranks']} x {rec['threads_per_rank']}", cells
        assert cells[4] == f"{rec['model_step_s'] * 1e3:.1f}" and cells[5] == f"{rec['ratio_median']:.3f}", cells
    print("check_validate.py: ok")


if __name__ == "__main__":
    main()
