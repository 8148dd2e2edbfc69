"""Run by test_distributed.py under ``mpirun -np N``: trains a tiny ResNet with
DistributedDataParallel for a few SGD steps on a fixed global batch and writes, per rank,
``<out>.rank<R>.npz`` with the parameters after training and the losses of each step (and the
same, keys "py.*", for a model defined in Python).
With ``--checks`` it first checks the process-group calls and DDP's refusals on every rank."""

import sys

import numpy as np

import strata
import strata.distributed as dist
from strata.models import ResNet
from strata.nn.parallel import DistributedDataParallel as DDP

GLOBAL_BATCH, STEPS, CHUNKS = 6, 3, 4


def expect_error(kind, text, fn):
    try:
        fn()
    except kind as e:
        assert text in str(e), f"expected {text!r} in {e}"
        return
    raise AssertionError(f"no {kind.__name__} raised (expected {text!r})")


def checks(rank, world):
    t = strata.tensor([float(rank + 1), 2.0 ** -30 * (rank + 1)], dtype=strata.float32)
    dist.all_reduce(t)
    want = sum(range(1, world + 1))
    assert t[0].item() == want, t
    expect_error(ValueError, "op='max' is not supported", lambda: dist.all_reduce(t, op="max"))
    expect_error(ValueError, f"world_size=99 but mpirun started {world}",
                 lambda: dist.init_process_group("mpi", world_size=99))
    dist.barrier()
    if world > 1:
        expect_error(strata.StrataError, f"chunks=1 is fewer than the {world} ranks",
                     lambda: DDP(strata.nn.Linear(2, 2), chunks=1))
    ddp = DDP(strata.nn.Linear(3, 2), chunks=world)
    expect_error(strata.StrataError, f"a global batch of 1 rows is smaller than the {world} ranks",
                 lambda: ddp.local_rows(1))


class PyMLP(strata.nn.Module):
    """A model defined in Python: DDP runs its Python forward on each chunk."""

    def __init__(self):
        super().__init__()
        self.w = strata.nn.Parameter(strata.randn(12, 5) * 0.1)
        self.fc = strata.nn.Linear(5, 5)

    def forward(self, x):
        return self.fc(strata.relu(x.flatten(1)[:, :12] @ self.w))


def train(model):
    ddp = DDP(model, chunks=CHUNKS)
    opt = strata.optim.SGD(ddp.parameters(), lr=0.1, momentum=0.9)
    criterion = strata.nn.CrossEntropyLoss()
    begin, end = ddp.local_rows(GLOBAL_BATCH)
    losses = []
    for step in range(STEPS):
        rng = np.random.default_rng(step)
        x = strata.from_numpy(rng.standard_normal((GLOBAL_BATCH, 3, 8, 8), dtype=np.float32))
        y = strata.from_numpy(rng.integers(0, 5, GLOBAL_BATCH, dtype=np.int64))
        out = ddp(x[begin:end])
        loss = criterion(out, ddp.gather(y[begin:end]))
        loss.backward()
        opt.step()
        opt.zero_grad()
        losses.append(loss.item())
    return losses


def main(out, with_checks):
    dist.init_process_group(backend="mpi")
    rank, world = dist.get_rank(), dist.get_world_size()
    strata.set_num_threads(1)
    if with_checks:
        checks(rank, world)
    strata.manual_seed(0)
    model = ResNet([1, 1], widths=[4, 8], stem="cifar", num_classes=5, in_channels=3)
    losses = train(model)
    params = {name: p.detach().numpy() for name, p in model.named_parameters()}
    py_model = PyMLP()
    params["py.losses"] = np.array(train(py_model), dtype=np.float64)
    params.update({"py." + name: p.detach().numpy() for name, p in py_model.named_parameters()})
    np.savez(f"{out}.rank{rank}.npz", losses=np.array(losses, dtype=np.float64), **params)
    dist.destroy_process_group()


if __name__ == "__main__":
    main(sys.argv[1], "--checks" in sys.argv[2:])
