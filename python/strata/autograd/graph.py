"""The recorded graph from Python: ``Node`` (what ``Tensor.grad_fn`` returns) and
``saved_tensors_hooks`` (torch.autograd.graph.saved_tensors_hooks)."""

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


__all__ = ["Node", "saved_tensors_hooks"]
