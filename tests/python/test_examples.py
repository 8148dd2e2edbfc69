"""The README's main job (examples/train_mlp.py, what scripts/run.sh runs) trains from Python: the
loss falls, the progress is shown, and bad flags are refused."""
import pathlib
import subprocess
import sys

import pytest


EXAMPLE = pathlib.Path(__file__).resolve().parents[2] / "examples" / "train_mlp.py"


def run(*args, timeout=600):
    return subprocess.run([sys.executable, str(EXAMPLE), *args], capture_output=True, text=True, timeout=timeout)


@pytest.mark.parametrize("args", [
    ["--steps", "150", "--samples", "1024"],
    ["--model", "cnn", "--steps", "60", "--samples", "512", "--batch", "32", "--optimizer", "adam", "--lr", "0.01"],
])
def test_training_from_python_lowers_the_loss_and_shows_progress(args, tmp_path):
    ckpt = tmp_path / "m.ckpt"
    p = run(*args, "--threads", "2", "--checkpoint", str(ckpt))
    assert p.returncode == 0, p.stdout + p.stderr
    assert "step " + args[args.index("--steps") + 1] + "/" in p.stderr  # the progress line reached the end
    assert "loss" in p.stderr
    last = [l for l in p.stdout.splitlines() if "->" in l][-1]
    first, final = (float(v) for v in last.split("loss ")[1].split(",")[0].split(" -> "))
    assert final < first / 2
    assert ckpt.exists() and ckpt.stat().st_size > 0


@pytest.mark.parametrize("args,message", [
    (["--steps", "0"], "--steps must be at least 1"),
    (["--lr", "-1"], "--lr must be a positive number"),
    (["--model", "rnn"], "invalid choice: 'rnn'"),
])
def test_bad_flags_exit_2_with_a_message(args, message):
    p = run(*args, timeout=120)
    assert p.returncode == 2 and message in p.stderr, p.stderr
