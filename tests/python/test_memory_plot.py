"""strata.memory_plot: occupancy timeline JSON -> PNG (the picture of the dissertation's Fig. 4.6)."""

import json
import subprocess
import sys

import numpy as np
import pytest

matplotlib = pytest.importorskip("matplotlib", reason="strata.memory_plot needs matplotlib")
import matplotlib.image  # noqa: E402

from strata import memory_plot  # noqa: E402
from strata.memory_plot import TimelineFormatError  # noqa: E402

GiB = 1 << 30
MiB = 1 << 20
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


def training_iteration_timeline():
    """A synthetic iteration shaped like Fig. 4.6: the forward pass fills DRAM, then spills to PM;
    the backward pass frees activations again."""
    samples, marks = [], [[0.0, "forward"]]
    fast_cap = 8 * GiB
    for i in range(200):
        t = i * 0.5
        if t < 50:  # forward: activations accumulate
            fast = min(fast_cap * 0.95, 0.3 * GiB * t)
            slow = max(0.0, 0.3 * GiB * t - fast_cap * 0.95)
        else:  # backward: freed as consumed
            left = max(0.0, 0.3 * GiB * (100 - t))
            fast = min(fast_cap * 0.9, left)
            slow = max(0.0, left - fast)
        samples.append([t, int(fast), int(slow)])
    marks.append([50.0, "backward"])
    marks.append([99.5, "update"])
    return {"version": 1, "unit": "bytes", "time_unit": "s", "fast_capacity": fast_cap,
            "slow_capacity": 64 * GiB, "min_interval": 0.5, "dropped_samples": 0,
            "dropped_marks": 0, "samples": samples, "marks": marks}


def write_json(path, data):
    path.write_text(json.dumps(data))
    return path


def color_fraction(image, hex_color, tol=0.08):
    """Fraction of pixels within `tol` of a color (RGB in [0, 1])."""
    rgb = np.array([int(hex_color[i:i + 2], 16) / 255 for i in (1, 3, 5)])
    close = np.all(np.abs(image[:, :, :3] - rgb) < tol, axis=2)
    return close.mean()


def test_renders_a_synthetic_timeline_to_a_png(tmp_path):
    src = write_json(tmp_path / "timeline.json", training_iteration_timeline())
    png = tmp_path / "occupancy.png"
    memory_plot.render_png(src, png, title="ResNet, one iteration")
    data = png.read_bytes()
    assert data[:8] == PNG_SIGNATURE
    assert len(data) > 10_000
    image = matplotlib.image.imread(png)
    assert image.ndim == 3 and image.shape[2] in (3, 4)
    height, width = image.shape[:2]
    assert (height, width) == (576, 1080)  # 9 x 4.8 inches at 120 dpi
    # Both curves are really drawn: some pixels carry each heap's line color.
    assert color_fraction(image, "#1f77b4") > 0.002
    assert color_fraction(image, "#ff7f0e") > 0.001
    assert not (tmp_path / "occupancy.png.tmp").exists()


def test_axes_use_gib_capacity_lines_and_marks():
    fig = memory_plot.plot_timeline(training_iteration_timeline(), title="t")
    ax = fig.axes[0]
    assert ax.get_ylabel() == "heap occupancy (GiB)"
    assert ax.get_xlabel() == "time (s)"
    legend = [t.get_text() for t in fig.legends[0].get_texts()]
    assert "fast heap (DRAM)" in legend and "slow heap (PM)" in legend
    assert "fast capacity (8.0 GiB)" in legend
    assert "slow capacity (64.0 GiB, off scale)" in legend  # 64 GiB would flatten a 7.6 GiB curve
    assert ax.get_ylim()[1] < 64
    labels = [t.get_text().strip() for t in ax.texts]
    assert labels == ["forward", "backward", "update"]


def test_small_short_timelines_scale_to_mib_and_ms():
    data = {"version": 1, "unit": "bytes", "time_unit": "s", "fast_capacity": None,
            "slow_capacity": None, "samples": [[0, 0, 0], [0.002, 3 * MiB, MiB], [0.004, MiB, 0]],
            "marks": []}
    ax = memory_plot.plot_timeline(data).axes[0]
    assert ax.get_ylabel() == "heap occupancy (MiB)"
    assert ax.get_xlabel() == "time (ms)"


def test_byte_unit():
    assert memory_plot.byte_unit(3 * GiB) == ("GiB", GiB)
    assert memory_plot.byte_unit(GiB - 1) == ("MiB", MiB)
    assert memory_plot.byte_unit(2048) == ("KiB", 1024)
    assert memory_plot.byte_unit(10) == ("bytes", 1)


def test_command_line_renders(tmp_path):
    src = write_json(tmp_path / "timeline.json", training_iteration_timeline())
    png = tmp_path / "out.png"
    proc = subprocess.run([sys.executable, "-m", "strata.memory_plot", str(src), str(png),
                           "--title", "from the CLI"], capture_output=True, text=True, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert png.read_bytes()[:8] == PNG_SIGNATURE


def _valid():
    return {"version": 1, "unit": "bytes", "time_unit": "s", "fast_capacity": 100,
            "slow_capacity": None, "samples": [[0, 1, 2], [1, 3, 4]], "marks": [[0.5, "x"]]}


@pytest.mark.parametrize("change, message", [
    (lambda d: d.update(version=2), "unsupported version 2; this strata.memory_plot reads version 1"),
    (lambda d: d.pop("samples"), "missing field 'samples'"),
    (lambda d: d.update(unit="MiB"), "'unit' must be \"bytes\", got 'MiB'"),
    (lambda d: d.update(time_unit="ms"), "'time_unit' must be \"s\""),
    (lambda d: d.update(fast_capacity=-1), "'fast_capacity' must be a non-negative number"),
    (lambda d: d.update(samples={"t": 1}), "'samples' must be a list"),
    (lambda d: d["samples"].append([2, 5]), r"samples\[2\] must be \[t, fast_bytes, slow_bytes\]"),
    (lambda d: d["samples"].append([2, "5", 1]), r"samples\[2\] must be"),
    (lambda d: d["samples"].append([2, True, 1]), r"samples\[2\] must be"),
    (lambda d: d["samples"].append([2, float("nan"), 1]), r"samples\[2\] must be"),  # JSON's NaN
    (lambda d: d["samples"].append([2, -5, 1]), r"samples\[2\] = \[2, -5, 1\] has a negative value"),
    (lambda d: d["samples"].append([0.5, 5, 1]), r"samples\[2\] goes back in time"),
    (lambda d: d["marks"].append([1, 7]), r"marks\[1\] must be \[t, \"label\"\]"),
])
def test_invalid_timelines_are_rejected_clearly(tmp_path, change, message):
    data = _valid()
    change(data)
    src = write_json(tmp_path / "bad.json", data)
    with pytest.raises(TimelineFormatError, match=message) as info:
        memory_plot.render_png(src, tmp_path / "out.png")
    assert str(src) in str(info.value)  # the error names the file
    assert not (tmp_path / "out.png").exists()


def test_not_json_and_not_an_object(tmp_path):
    src = tmp_path / "broken.json"
    src.write_text('{"version": 1, "samples": [')
    with pytest.raises(TimelineFormatError, match=r"broken.json: not valid JSON \(.* line 1"):
        memory_plot.load_timeline(src)
    src.write_text("[1, 2]")
    with pytest.raises(TimelineFormatError, match="expected a JSON object"):
        memory_plot.load_timeline(src)
    with pytest.raises(TimelineFormatError, match="cannot read the timeline"):
        memory_plot.load_timeline(tmp_path / "missing.json")


def test_text_that_is_not_utf8_is_rejected_clearly(tmp_path):
    src = tmp_path / "latin1.json"
    src.write_bytes(b'{"version": 1, "marks": [[0, "\xe9t\xe9"]]}')
    with pytest.raises(TimelineFormatError, match=r"latin1.json: not valid UTF-8 text"):
        memory_plot.render_png(src, tmp_path / "out.png")
    assert not (tmp_path / "out.png").exists()


def test_command_line_rejects_a_bad_dpi_without_writing(tmp_path):
    src = write_json(tmp_path / "timeline.json", _valid())
    png = tmp_path / "out.png"
    for dpi in ("5", "100000"):
        proc = subprocess.run([sys.executable, "-m", "strata.memory_plot", str(src), str(png),
                               "--dpi", dpi], capture_output=True, text=True, cwd=tmp_path)
        assert proc.returncode == 1, dpi
        assert f"dpi must be an integer in [10, 1200], got {dpi}" in proc.stderr
        assert "Traceback" not in proc.stderr
    assert not png.exists()


def test_an_empty_timeline_says_why_there_is_nothing_to_plot(tmp_path):
    data = _valid()
    data["samples"] = []
    src = write_json(tmp_path / "empty.json", data)
    with pytest.raises(TimelineFormatError, match="no samples.*was it enabled"):
        memory_plot.render_png(src, tmp_path / "out.png")


def test_command_line_reports_bad_input_without_writing(tmp_path):
    data = _valid()
    data["version"] = 7
    src = write_json(tmp_path / "v7.json", data)
    png = tmp_path / "out.png"
    proc = subprocess.run([sys.executable, "-m", "strata.memory_plot", str(src), str(png)],
                          capture_output=True, text=True, cwd=tmp_path)
    assert proc.returncode == 1
    assert "strata.memory_plot: error:" in proc.stderr
    assert "v7.json: unsupported version 7" in proc.stderr
    assert "Traceback" not in proc.stderr
    assert not png.exists()


def test_unwritable_output_is_reported_and_leaves_no_partial_file(tmp_path):
    src = write_json(tmp_path / "timeline.json", _valid())
    png = tmp_path / "no" / "such" / "dir" / "out.png"
    proc = subprocess.run([sys.executable, "-m", "strata.memory_plot", str(src), str(png)],
                          capture_output=True, text=True, cwd=tmp_path)
    assert proc.returncode == 1
    assert f"cannot write '{png}'" in proc.stderr
    assert not (tmp_path / "no").exists()
