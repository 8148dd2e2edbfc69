"""The configuration layer (core/config.h, docs/CONFIG.md): a STRATA_* variable with a value that does
not parse is an error naming the variable and the value where the setting is first used, never ignored.
The memory variables are tested in test_memory.py, STRATA_NUM_THREADS in test_tensor.py."""

import os
import subprocess
import sys

import pytest

CONV = """
import strata
import strata.nn.functional as F
try:
    F.conv2d(strata.ones((1, 1, 4, 4)), strata.ones((1, 1, 3, 3)))
    print("ran")
except strata.StrataError as e:
    print(e)
"""


def run_conv(value):
    env = {k: v for k, v in os.environ.items() if k != "STRATA_DNNL_PRIMITIVES"}
    env["STRATA_DNNL_PRIMITIVES"] = value
    proc = subprocess.run([sys.executable, "-c", CONV], env=env, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


@pytest.mark.parametrize("value", ["yes", "", "Always", "2"])
def test_bad_dnnl_primitives_fails_the_first_op_that_consults_it(value):
    # It used to mean Always for anything but 0, off and auto ("" meant auto).
    out = run_conv(value)
    assert f"STRATA_DNNL_PRIMITIVES: expected auto, 1 (on, always) or 0 (off, never), got '{value}'" in out, out


@pytest.mark.parametrize("value", ["auto", "1", "on", "always", "0", "off", "never"])
def test_every_dnnl_primitives_spelling_runs(value):
    assert run_conv(value).strip() == "ran"
