"""strata.distributed: torch.distributed's process-group calls on Strata's MPI communicator
(``strata::dist::Communicator``, dist/communicator.h).

Launch every rank with MPI on one machine::

    mpirun -np 2 python train.py          # Open MPI as root: add --allow-run-as-root --oversubscribe

and in the script::

    import strata.distributed as dist
    dist.init_process_group(backend="mpi")   # MPI is initialized by the communicator
    rank, world = dist.get_rank(), dist.get_world_size()

Only ``backend="mpi"`` exists; the ranks and their count come from ``mpirun``. ``all_reduce`` adds
in Strata's fixed tree order (Note [Deterministic reduction order]), so its result does not depend
on how many ranks there are or on MPI's algorithms; only ``ReduceOp.SUM`` is offered.
"""

from __future__ import annotations

from . import _C
from .autograd import no_grad

__all__ = [
    "ReduceOp",
    "is_available",
    "is_mpi_available",
    "is_initialized",
    "init_process_group",
    "destroy_process_group",
    "get_rank",
    "get_world_size",
    "get_backend",
    "all_reduce",
    "barrier",
]


class ReduceOp:
    """The reductions of :func:`all_reduce` (torch.distributed.ReduceOp's name): only SUM."""

    SUM = "sum"


_state = {"initialized": False, "rank": 0, "world_size": 1}


def is_available() -> bool:
    return True


def is_mpi_available() -> bool:
    """True when this build of Strata has MPI (otherwise one process of size 1)."""
    return _C.dist.built_with_mpi()


def is_initialized() -> bool:
    return _state["initialized"]


def init_process_group(backend: str = "mpi", init_method=None, world_size: int = -1, rank: int = -1, **kwargs):
    """Initializes MPI through Strata's communicator. ``backend`` must be ``"mpi"``; ``world_size``
    and ``rank``, when given, must be what ``mpirun`` set."""
    if backend != "mpi":
        raise ValueError(
            f"init_process_group: backend {backend!r} is not supported: strata.distributed runs on MPI only "
            "(backend='mpi', ranks launched with mpirun)")
    if init_method is not None:
        raise ValueError("init_process_group: init_method is not used with backend='mpi' (mpirun sets up the ranks)")
    if kwargs:
        raise TypeError(f"init_process_group: unexpected argument(s) {', '.join(sorted(kwargs))}")
    r, size, _ = _C.dist.init()
    if world_size not in (-1, size):
        raise ValueError(f"init_process_group: world_size={world_size} but mpirun started {size} rank(s)")
    if rank not in (-1, r):
        raise ValueError(f"init_process_group: rank={rank} but MPI says this is rank {r}")
    _state.update(initialized=True, rank=r, world_size=size)


def destroy_process_group(group=None):
    """Ends the process group (MPI itself is finalized when the process exits)."""
    _require("destroy_process_group")
    _state["initialized"] = False


def _require(what: str):
    if not _state["initialized"]:
        raise RuntimeError(f"{what}: the default process group has not been initialized; "
                           "call strata.distributed.init_process_group(backend='mpi') first")


def get_rank(group=None) -> int:
    _require("get_rank")
    return _state["rank"]


def get_world_size(group=None) -> int:
    _require("get_world_size")
    return _state["world_size"]


def get_backend(group=None) -> str:
    _require("get_backend")
    return "mpi"


def all_reduce(tensor, op=ReduceOp.SUM, group=None, async_op: bool = False):
    """Replaces ``tensor`` (f32, f64 or i64, same shape on every rank) in place by its sum over the
    ranks, added in Strata's fixed tree order (bitwise the same at any rank count)."""
    _require("all_reduce")
    if op != ReduceOp.SUM:
        raise ValueError(f"all_reduce: op={op!r} is not supported (only ReduceOp.SUM, which is deterministic)")
    if async_op:
        raise ValueError("all_reduce: async_op=True is not supported (use DistributedDataParallel, whose "
                         "gradient reductions overlap backward)")
    with no_grad():
        tensor.copy_(_C.dist.all_reduce(tensor))
    return None


def barrier(group=None):
    """Returns once every rank called it."""
    _require("barrier")
    _C.dist.barrier()
