"""Fault injection from Python (Note [Fault-injection suite] in tests/cpp/fault): the slow tier on a
full tmpfs and under an address-space limit, in child interpreters, each ending in a StrataError
or success — never a signal. The tmpfs cases need root (CI runs as root) and skip otherwise."""

import os
import resource
import subprocess
import sys
import tempfile
import textwrap

import pytest


def _run(code, env=None, limit_as=None, timeout=300):
    def preexec():
        if limit_as is not None:
            resource.setrlimit(resource.RLIMIT_AS, (limit_as, limit_as))

    full_env = {k: v for k, v in os.environ.items() if not k.startswith("STRATA_")}
    full_env.update(env or {})
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], env=full_env, capture_output=True,
                          text=True, timeout=timeout, preexec_fn=preexec, cwd=tempfile.gettempdir())


@pytest.fixture
def tmpfs():
    """Mounts an 8 MiB tmpfs; yields its path."""
    if os.geteuid() != 0:
        pytest.skip("mounting a tmpfs needs root (CI runs as root)")
    path = tempfile.mkdtemp(prefix="strata-fault-")
    r = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=8m", "tmpfs", path], capture_output=True, text=True)
    if r.returncode != 0:
        os.rmdir(path)
        pytest.skip(f"cannot mount a tmpfs: {r.stderr.strip()}")
    yield path
    subprocess.run(["umount", "-l", path], check=False)
    os.rmdir(path)


def test_slow_tier_on_a_small_tmpfs_is_an_error_not_a_bus_error(tmpfs):
    # Issue 24's repro: 40 MiB of tensors, a 2 MiB fast tier, the slow tier on an 8 MiB tmpfs.
    r = _run("""
        import strata
        try:
            ts = [strata.ones((256, 1024)) for _ in range(40)]
        except strata.StrataError as e:
            print("StrataError:", e)
            raise SystemExit(3)
        """, env={"STRATA_SLOW_DIR": tmpfs, "STRATA_SLOW_BYTES": "64M", "STRATA_FAST_BYTES": "2M"})
    assert r.returncode == 3, (r.returncode, r.stdout, r.stderr)
    assert tmpfs in r.stdout and "No space left on device" in r.stdout, r.stdout


def test_a_job_that_fits_the_small_tmpfs_runs(tmpfs):
    r = _run("""
        import strata
        ts = [strata.ones((256, 1024)) for _ in range(6)]
        print(sum(float(t.sum()) for t in ts))
        print(strata.memory.stats()["heaps"]["slow"]["mapped_bytes"])
        """, env={"STRATA_SLOW_DIR": tmpfs, "STRATA_SLOW_BYTES": "64M", "STRATA_FAST_BYTES": "2M"})
    assert r.returncode == 0, (r.stdout, r.stderr)
    total, mapped = r.stdout.split()
    assert float(total) == 6 * 256 * 1024
    assert int(mapped) <= 8 << 20  # grown on demand, not the 64M limit


def test_the_default_configuration_runs_in_four_gib_of_address_space():
    r = _run("""
        import strata
        a = strata.ones((512, 512))
        print(float((a @ a).sum()))
        s = strata.memory.stats()["heaps"]
        print(s["fast"]["mapped_bytes"] < s["fast"]["capacity_bytes"], s["slow"]["mapped_bytes"] < (1 << 30))
        """, limit_as=4 << 30)
    assert r.returncode == 0, (r.stdout, r.stderr)
    lines = r.stdout.split("\n")
    assert float(lines[0]) == 512.0 ** 3
    assert lines[1] == "True True"
