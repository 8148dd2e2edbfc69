"""Tests of the network model's scripts (bench/netmodel/): the SMPI platforms, the model-vs-SMPI
comparison and the efficiency plot, on small inputs, with their bad inputs. No timing is asserted."""
import json
import pathlib
import subprocess
import sys

NETMODEL = pathlib.Path(__file__).resolve().parents[2] / "bench" / "netmodel"


def run(script, *args):
    return subprocess.run([sys.executable, str(NETMODEL / script), *map(str, args)], capture_output=True, text=True)


def platform(tmp_path, hosts, topology, latency=8e-6, bandwidth=2e9):
    stem = tmp_path / f"p{hosts}{topology}"
    r = run("smpi_platform.py", "--hosts", hosts, "--latency", latency, "--bandwidth", bandwidth,
            "--topology", topology, "--out", stem)
    return r, stem


def test_star_halves_the_latency_per_link_and_splits_the_duplex(tmp_path):
    r, stem = platform(tmp_path, 8, "star")
    assert r.returncode == 0, r.stderr
    xml = (stem.with_suffix(".xml")).read_text()
    assert 'radical="0-7"' in xml and 'lat="4e-06s"' in xml and 'bw="2e+09Bps"' in xml
    assert 'sharing_policy="SPLITDUPLEX"' in xml and 'bb_sharing_policy="FATPIPE"' in xml
    assert (stem.with_suffix(".hosts")).read_text().split() == [f"node-{i}" for i in range(8)]


def test_fat_trees_have_full_or_half_bisection(tmp_path):
    r, stem = platform(tmp_path, 8, "fattree")
    assert r.returncode == 0, r.stderr
    assert 'topo_parameters="2;4,2;1,4;1,1"' in stem.with_suffix(".xml").read_text()
    assert 'lat="2e-06s"' in stem.with_suffix(".xml").read_text()  # four links across the spine
    r, stem = platform(tmp_path, 64, "taper2")
    assert r.returncode == 0, r.stderr
    assert 'topo_parameters="2;8,8;1,4;1,1"' in stem.with_suffix(".xml").read_text()


def test_platform_bad_inputs_are_named(tmp_path):
    r, _ = platform(tmp_path, 1, "star")
    assert r.returncode != 0 and "--hosts 1 (at least 2)" in r.stderr
    r, _ = platform(tmp_path, 10, "fattree")
    assert r.returncode != 0 and "--hosts 10 is not a multiple of the 4-port leaf switches" in r.stderr
    r, _ = platform(tmp_path, 8, "star", bandwidth=0)
    assert r.returncode != 0 and "--bandwidth 0.0 > 0" in r.stderr
    r, _ = platform(tmp_path, 8, "ring")
    assert r.returncode != 0 and "invalid choice: 'ring'" in r.stderr


def model_json(tmp_path, schedules):
    path = tmp_path / "model.json"
    path.write_text(json.dumps({"schedules": schedules, "fabrics": [], "records": []}))
    return path


def test_compare_pairs_each_collective_with_the_model(tmp_path):
    model = model_json(tmp_path, [
        {"config": "kaggle", "nodes": 8, "fabric": "ib100", "collective": c, "model_s": t}
        for c, t in [("forward alltoallv", 0.002), ("backward alltoallv", 0.002), ("top allreduce", 0.001),
                     ("bottom allreduce", 0.0005)]])
    out = tmp_path / "smpi"
    out.mkdir()
    (out / "kaggle_8_ib100_fattree.out").write_text(
        "forward_alltoallv 0.0025\nbackward_alltoallv 0.002\ntop_allreduce 0.001\nbottom_allreduce 0.0005\n")
    r = run("smpi_compare.py", model, out)
    assert r.returncode == 0, r.stderr
    assert "| kaggle | ib100 | fattree | 8 | forward alltoallv | 2.500 | 2.000 | 0.800 |" in r.stdout
    assert "| kaggle | ib100 | fattree | 8 | 6.000 | 5.500 | 0.917 |" in r.stdout  # the step's four summed
    assert "model/SMPI from 0.800 to 1.000" in r.stdout
    records = json.loads((out / "smpi.json").read_text())["records"]
    assert len(records) == 4 and {r["topology"] for r in records} == {"fattree"}


def test_compare_bad_inputs_are_named(tmp_path):
    out = tmp_path / "smpi"
    out.mkdir()
    r = run("smpi_compare.py", model_json(tmp_path, []), out)
    assert r.returncode != 0 and "has no schedules" in r.stderr
    (out / "kaggle_16_ib100_star.out").write_text("forward_alltoallv 0.001\n")
    model = model_json(tmp_path, [{"config": "kaggle", "nodes": 8, "fabric": "ib100",
                                   "collective": "forward alltoallv", "model_s": 0.001}])
    r = run("smpi_compare.py", model, out)
    assert r.returncode != 0 and "no model time for ('kaggle', 16, 'ib100', 'forward_alltoallv')" in r.stderr
    r = run("smpi_compare.py", model)
    assert r.returncode != 0 and "usage" in r.stderr


def test_plot_writes_a_png_and_refuses_an_empty_projection(tmp_path):
    points = [{"nodes": n, "efficiency": e} for n, e in [(1, 1.0), (8, 0.9), (64, 0.5)]]
    records = [{"config": "random-bench", "fabric": f, "scaling": s, "points": points}
               for f in ("25gbe", "ib100") for s in ("weak", "strong")]
    path = tmp_path / "model.json"
    path.write_text(json.dumps({"strong_batch_factor": 16, "compute_speedup": 1, "records": records}))
    png = tmp_path / "eff.png"
    r = run("plot.py", path, png)
    assert r.returncode == 0, r.stderr
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    path.write_text(json.dumps({"strong_batch_factor": 16, "records": []}))
    r = run("plot.py", path, png)
    assert r.returncode != 0 and "has no projections" in r.stderr
