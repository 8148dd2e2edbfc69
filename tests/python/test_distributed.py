"""strata.distributed and strata.nn.parallel.DistributedDataParallel: a tiny ResNet (and a model
defined in Python) trained at 2 and 3 ranks (``mpirun -np N``) ends with the parameters and losses
of the 1-rank run, bitwise; the process-group calls refuse what they do not support."""

import os
import pathlib
import shutil
import subprocess
import sys

import numpy as np
import pytest

import strata
import strata.distributed as dist
from strata.nn.parallel import DistributedDataParallel as DDP

SCRIPT = pathlib.Path(__file__).with_name("ddp_resnet_train.py")
MPIRUN = shutil.which("mpirun")


def _mpirun(ranks, out, *args):
    cmd = [MPIRUN]
    version = subprocess.run([MPIRUN, "--version"], capture_output=True, text=True).stdout
    if "Open MPI" in version or "OpenRTE" in version:
        cmd += ["--oversubscribe", "--allow-run-as-root"]
    cmd += ["-np", str(ranks), sys.executable, str(SCRIPT), str(out), *args]
    env = dict(os.environ, STRATA_NUM_THREADS="1", STRATA_DIST_TIMEOUT="30")
    run = subprocess.run(cmd, capture_output=True, text=True, timeout=120, env=env)
    assert run.returncode == 0, f"{' '.join(cmd)} failed:\n{run.stdout}\n{run.stderr}"


@pytest.mark.skipif(MPIRUN is None or not dist.is_mpi_available(), reason="needs mpirun and an MPI build")
def test_resnet_at_two_and_three_ranks_equals_one_rank_bitwise(tmp_path):
    _mpirun(1, tmp_path / "one")
    _mpirun(2, tmp_path / "two", "--checks")
    _mpirun(3, tmp_path / "three")  # uneven: the 4 chunks of 6 rows go 2, 1, 1 to the ranks
    one = np.load(tmp_path / "one.rank0.npz")
    assert len(one.files) > 10  # losses and every parameter of the ResNet and of the Python model
    for ranks, name in ((2, "two"), (3, "three")):
        for rank in range(ranks):
            other = np.load(tmp_path / f"{name}.rank{rank}.npz")
            assert sorted(other.files) == sorted(one.files)
            for key in one.files:
                same = one[key].dtype == other[key].dtype and one[key].tobytes() == other[key].tobytes()
                assert same, (ranks, rank, key)
    # The steps trained: the loss changed.
    assert len(set(one["losses"].tolist())) == 3


@pytest.fixture()
def no_group():
    if dist.is_initialized():
        dist.destroy_process_group()
    yield


@pytest.mark.parametrize("backend", ["gloo", "nccl", "ccl"])
def test_other_backends_are_refused(no_group, backend):
    with pytest.raises(ValueError, match=f"backend '{backend}' is not supported: strata.distributed runs on MPI only"):
        dist.init_process_group(backend=backend)
    assert not dist.is_initialized()


def test_calls_before_init_are_refused(no_group):
    for call in (dist.get_rank, dist.get_world_size, dist.barrier, dist.destroy_process_group):
        with pytest.raises(RuntimeError, match="has not been initialized"):
            call()
    with pytest.raises(RuntimeError, match="has not been initialized"):
        dist.all_reduce(strata.zeros(2))
    with pytest.raises(RuntimeError, match="call strata.distributed.init_process_group"):
        DDP(strata.nn.Linear(2, 2))
    with pytest.raises(ValueError, match="init_method is not used"):
        dist.init_process_group("mpi", init_method="tcp://localhost:1234")
