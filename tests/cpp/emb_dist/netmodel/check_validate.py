"""Checks strata-netmodel --validate's report against the strata-dlrm runs it read: the runs' per-step
phases add up to their sums; one record and one table row per run, in order; the measured figures
are the runs' (rank 0's step-time median and mean, the most blocked rank, rank 0's allreduce busy
time, per step); compute is the busiest rank's mean phase sum; the ratios, exposed time, worker
share and speed (the top MLP's forward per chunk against the 1 x 1 run's) follow from the rest.
Usage: check_validate.py REPORT.json REPORT.md RUN.json..."""
import json
import statistics
import sys

PHASES = ["other", "lookup_remote", "lookup", "bottom_mlp", "interaction", "top_mlp", "backward",
          "sparse_update", "dense_optimizer"]


def close(a, b, what):
    """Equal but for the JSON writer's 9 significant digits (of seconds, for differences: 10 ps)."""
    assert abs(a - b) <= 1e-7 * max(abs(a), abs(b)) + 1e-11, f"{what}: {a} != {b}"


def check_run_json(run):
    """strata-dlrm's per-step phases add up to its summed phases, one value per step."""
    for r in run["ranks"]:
        for name, total in r["phases_s"].items():
            steps = r["phase_steps_s"][name]
            assert len(steps) == run["iterations"], (name, len(steps))
            close(sum(steps), total, f"rank {r['rank']} {name}: the steps' sum")
            assert min(steps) >= 0, (name, steps)


def check_record(rec, run, path, cores, probe):
    steps = run["iterations"]
    ms = run["step_ms"]["samples"]
    means = rec["of_mean_phases"]
    assert rec["run"] == path and rec["ranks"] == run["world_size"] and rec["threads_per_rank"] == run["threads"], rec
    assert rec["steps"] == steps == len(ms), rec
    close(rec["measured_median_s"], statistics.median(ms) * 1e-3, "median")
    close(rec["measured_mean_s"], sum(ms) / len(ms) * 1e-3, "mean")
    compute = max(sum(r["phases_s"][p] for p in PHASES) / steps for r in run["ranks"])
    close(means["compute_s"], compute, "compute")
    close(rec["measured_blocked_s"], max(r["phases_s"]["waited"] for r in run["ranks"]) / steps, "blocked")
    close(rec["measured_allreduce_busy_s"], run["ranks"][0]["collectives"]["allreduce"]["busy_s"] / steps, "busy")
    close(rec["ratio_median"], rec["model_median_s"] / rec["measured_median_s"], "ratio of the medians")
    close(rec["ratio_mean"], rec["model_mean_s"] / rec["measured_mean_s"], "ratio of the means")
    close(means["exposed_s"], means["step_s"] - means["compute_s"], "exposed")
    close(rec["worker_share"], min(1.0, cores / (run["world_size"] * (run["threads"] + 1))), "worker share")
    n, c = run["world_size"], run["chunks"]
    top = sum(r["phases_s"]["top_mlp"] / steps / (c // n + (r["rank"] < c % n)) for r in run["ranks"]) / n
    close(rec["top_mlp_per_chunk_s"], top, "the top MLP per chunk")
    close(rec["worker_speed"], probe / top, "the worker's speed: the host-rate run's top MLP per chunk over this run's")
    assert means["step_s"] >= means["compute_s"] > 0 and rec["model_median_s"] > 0, rec
    # Each step's model is at least every rank's compute in that step, so their mean is at least
    # every rank's mean compute.
    assert rec["model_mean_s"] >= means["compute_s"] * (1 - 1e-12), rec
    assert 0 <= means["allreduce_local_s"] <= means["allreduce_s"], rec
    if run["world_size"] == 1:  # one process: no messages; its allreduce busy time fits the host rate
        assert means["check_s"] == means["forward_a2a_s"] == means["gather_s"] == means["backward_a2a_s"] == 0, rec
        close(means["allreduce_s"], rec["measured_allreduce_busy_s"], "the 1-rank allreduce at its own rate")
    else:
        assert rec["fabric_fitted_at_ranks"] == 2 and min(means["forward_a2a_s"], means["gather_s"]) > 0, rec


def main():
    report = json.load(open(sys.argv[1]))
    table = open(sys.argv[2]).read().splitlines()
    paths = sys.argv[3:]
    for k in ("binary", "mode", "cores", "host_bytes_per_second", "host_rate_from", "records"):
        assert k in report, "missing " + k
    assert report["mode"] == "validate" and report["host_rate_from"] == paths[0], report
    assert report["host_bytes_per_second"] > 0, report
    first = json.load(open(paths[0]))  # the 1 x 1 run: the host rate's and the speed probe's
    close(report["host_rate_top_mlp_per_chunk_s"],
          first["ranks"][0]["phases_s"]["top_mlp"] / first["iterations"] / first["chunks"], "the probe")
    assert len(report["records"]) == len(paths), report["records"]
    rows = [line for line in table if line.startswith("| /")]
    assert len(rows) == len(paths), table
    for rec, path, row in zip(report["records"], paths, rows):
        run = json.load(open(path))
        check_run_json(run)
        check_record(rec, run, path, report["cores"], report["host_rate_top_mlp_per_chunk_s"])
        cells = [c.strip() for c in row.strip("|").split("|")]
        assert cells[0] == path and cells[1] == f"{rec['ranks']} x {rec['threads_per_rank']}", cells
        assert cells[3] == f"{rec['model_median_s'] * 1e3:.1f}" and cells[6] == f"{rec['ratio_median']:.3f}", cells
    print("check_validate.py: ok")


if __name__ == "__main__":
    main()
