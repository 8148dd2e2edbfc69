"""The recorded graph from Python: ``Node`` (what ``Tensor.grad_fn`` returns),
``saved_tensors_hooks`` (torch.autograd.graph.saved_tensors_hooks) and ``stream_tape`` (tape
streaming to the slow tier, the tiered counterpart of torch.autograd.graph.save_on_cpu)."""

from .. import _C

Node = _C.Node


class saved_tensors_hooks:
    """Context manager: while active, every value an op saves for backward is passed to
    ``pack_hook(tensor)``, which returns any Python object to keep instead; during backward
    ``unpack_hook(obj)`` must return a Tensor of the same shape and dtype. Values saved inside the
    block are unpacked with these hooks even if backward runs after the block. Nested blocks: the
    innermost wins. Hooks are per thread."""

    def __init__(self, pack_hook, unpack_hook):
        self._guard = _C._SavedTensorHooksGuard(pack_hook, unpack_hook)

    def __enter__(self):
        self._guard._enter()
        return self

    def __exit__(self, *exc):
        self._guard._exit()
        return False


class stream_tape:
    """Context manager: streams the tape of the forward run inside it to the slow tier (TapeFlow on
    tensors; autograd/tape/stream.h, Note [Tape streaming]).

    Every value an op saves for backward is copied, as it is saved, into the current *layer*'s tile
    of ``tape_budget_bytes`` fast-tier bytes (the values one op saves stay together); a full tile is
    spilled to the slow tier on the mover thread while the forward goes on. During backward, the
    first use of a layer prefetches the ``prefetch_distance`` layers before it, so backward waits
    only when the slow tier cannot keep up. Parameters are not copied (they stay alive anyway)
    unless ``stream_parameters``; values under ``min_stream_bytes`` and non-contiguous ones are kept
    as they are. Gradients are bitwise those of the step without streaming.

    One context streams one forward; backward may run after the block. ``report()`` (a dict: layers,
    bytes each way, spills, prefetches, stall and transfer seconds, ``overlap`` = the fraction of
    transfer time hidden behind compute, per-layer info) and ``explain()`` (text) describe the step
    so far; call them after backward for the whole step.

    Example::

        with strata.autograd.graph.stream_tape(tape_budget_bytes=4 << 20) as tape:
            loss = F.cross_entropy(model(x), y)
        loss.backward()
        print(tape.explain())
    """

    def __init__(self, tape_budget_bytes: int = 16 << 20, prefetch_distance: int = 1,
                 min_stream_bytes: int = 4096, stream_parameters: bool = False):
        self._stream = _C._TapeStream(tape_budget_bytes, prefetch_distance, min_stream_bytes,
                                      stream_parameters)

    @property
    def tape_budget_bytes(self) -> int:
        return self._stream.tape_budget_bytes

    @property
    def prefetch_distance(self) -> int:
        return self._stream.prefetch_distance

    def __enter__(self):
        self._stream._enter()
        return self

    def __exit__(self, *exc):
        self._stream._exit()
        return False

    def report(self) -> dict:
        return self._stream.report()

    def explain(self) -> str:
        return self._stream.explain()

    def __repr__(self):
        return (f"stream_tape(tape_budget_bytes={self.tape_budget_bytes}, "
                f"prefetch_distance={self.prefetch_distance})")


__all__ = ["Node", "saved_tensors_hooks", "stream_tape"]
