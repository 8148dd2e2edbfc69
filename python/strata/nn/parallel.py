"""strata.nn.parallel: :class:`DistributedDataParallel`, torch's DDP on Strata's data-parallel
engine (C++ ``strata::dist::DataParallel``, Note [Data-parallel chunks] in dist/data_parallel/data_parallel.cpp).

A training step reads like PyTorch's, with one difference: the output is the *global* batch's::

    import strata.distributed as dist
    from strata.nn.parallel import DistributedDataParallel as DDP

    dist.init_process_group(backend="mpi")
    ddp = DDP(model, chunks=8)
    begin, end = ddp.local_rows(B)            # this rank's rows of the global batch of B rows
    out = ddp(x[begin:end])                   # output rows of the whole batch, rank 0's first
    loss = criterion(out, y)                  # y: the global batch's targets (or ddp.gather(y_local))
    loss.backward()                           # reduces the gradients while backward runs
    opt.step()

The batch splits into ``chunks`` fixed chunks whatever the rank count; each rank runs its chunks
one by one and the chunk gradients are added in one fixed tree, so the parameters (and the losses,
computed from the same global output on every rank) are bitwise those of a one-process run of the
same chunks, at any rank count.
"""

from __future__ import annotations

from .. import _C
from .. import distributed as _dist
from .._C.nn import Module

__all__ = ["DistributedDataParallel"]


class DistributedDataParallel(Module):
    """Wraps ``module`` (the same on every rank; rank 0's parameters and buffers are copied to the
    others unless ``broadcast_buffers=False``). ``chunks``: how many chunks the global batch splits
    into (at least the rank count); ``bucket_cap_mb``: gradient bucket size in MB (MiB)."""

    def __init__(self, module, chunks: int = 8, bucket_cap_mb: float = 1.0, broadcast_buffers: bool = True,
                 device_ids=None, output_device=None):
        super().__init__()
        if not _dist.is_initialized():
            raise RuntimeError("DistributedDataParallel: the default process group has not been initialized; "
                               "call strata.distributed.init_process_group(backend='mpi') first")
        if device_ids not in (None, [], ["cpu"]) or output_device not in (None, "cpu"):
            raise ValueError("DistributedDataParallel: Strata runs on the CPU; "
                             "leave device_ids and output_device unset")
        if isinstance(chunks, bool) or not isinstance(chunks, int):
            raise TypeError(f"DistributedDataParallel: chunks must be an int, got {type(chunks).__name__}")
        if not bucket_cap_mb > 0:
            raise ValueError(f"DistributedDataParallel: bucket_cap_mb must be > 0, got {bucket_cap_mb}")
        self.module = module
        self._engine = _C.dist.DataParallel(module, chunks=chunks, bucket_bytes=max(1, int(bucket_cap_mb * 2**20)),
                                            broadcast_state=broadcast_buffers)

    def forward(self, local_input):
        """Runs this rank's chunks on ``local_input`` (rows ``local_rows(B)`` of the global batch) and
        returns the global batch's output; backward from it reduces the gradients into ``.grad``."""
        return self._engine.forward(local_input)

    def local_rows(self, global_batch: int):
        """(begin, end): the rows of a global batch of ``global_batch`` rows this rank passes to forward."""
        return self._engine.local_rows(global_batch)

    def gather(self, local):
        """Every rank's rows of ``local`` (e.g. its targets) concatenated in rank order."""
        return self._engine.gather(local)

    @property
    def chunks(self) -> int:
        return self._engine.chunks

    @property
    def buckets(self):
        """The gradient buckets: positions among the parameters that require grad, first reduced first."""
        return self._engine.buckets
