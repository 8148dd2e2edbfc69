"""``strata.utils.hooks.RemovableHandle`` (torch.utils.hooks.RemovableHandle): what
``Tensor.register_hook`` and the ``Module.register_*hook`` methods return; ``remove()`` unregisters
the hook, and so does leaving a ``with handle:`` block. The class is C++ (python/src/bindings.h)."""

from .. import _C

RemovableHandle = _C.RemovableHandle

__all__ = ["RemovableHandle"]
