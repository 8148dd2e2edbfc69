"""Activation checkpointing with torch.utils.checkpoint's signatures.

``checkpoint(function, *args, use_reentrant=None, preserve_rng_state=True, **kwargs)`` runs
``function(*args, **kwargs)`` keeping none of the values saved inside it for backward; the first
time backward needs one, ``function`` re-runs on the saved inputs and its values serve the rest of
the segment's backward (PyTorch's non-reentrant checkpoint; Strata's C++ implementation,
autograd/remat/checkpoint.h, Note [Checkpointed segments]). With ``preserve_rng_state`` the default
generator replays the state of the first run, so dropout draws the same masks. Re-running a module
with side effects applies them again (batch norm's running statistics are updated twice, as in
PyTorch). ``checkpoint_sequential(functions, segments, input, use_reentrant=None, **kwargs)``
splits a ``Sequential`` (or a list of callables) into ``segments`` runs of ``len // segments``
callables, checkpointing all but the last, which takes the remainder and runs normally.

Only the non-reentrant variant exists: ``use_reentrant=True`` raises NotImplementedError;
``None`` (PyTorch's default, which now warns there) and ``False`` select it.
"""

from __future__ import annotations

from typing import Any, Callable, Iterable

from .. import _C
from .._C import Tensor

__all__ = ["checkpoint", "checkpoint_sequential"]

_REENTRANT = (
    "strata.utils.checkpoint: use_reentrant=True is not supported; Strata implements the "
    "non-reentrant checkpoint only (use_reentrant=False, which PyTorch recommends)"
)


def _check_reentrant(use_reentrant: Any) -> None:
    if use_reentrant is None or use_reentrant is False:
        return
    if use_reentrant is True:
        raise NotImplementedError(_REENTRANT)
    raise TypeError(f"strata.utils.checkpoint: use_reentrant must be a bool or None, got {type(use_reentrant).__name__}")


def _flatten(obj: Any, tensors: list) -> Any:
    """Replaces every Tensor in nested tuples/lists/dicts by its index in `tensors` (appended)."""
    if isinstance(obj, Tensor):
        tensors.append(obj)
        return _Slot(len(tensors) - 1)
    if isinstance(obj, tuple) and type(obj) is not tuple and hasattr(obj, "_fields"):  # namedtuple
        return type(obj)(*(_flatten(x, tensors) for x in obj))
    if isinstance(obj, (tuple, list)):
        return type(obj)(_flatten(x, tensors) for x in obj)
    if isinstance(obj, dict):
        return {k: _flatten(v, tensors) for k, v in obj.items()}
    return obj


def _unflatten(spec: Any, tensors: list) -> Any:
    if isinstance(spec, _Slot):
        return tensors[spec.index]
    if isinstance(spec, tuple) and type(spec) is not tuple and hasattr(spec, "_fields"):
        return type(spec)(*(_unflatten(x, tensors) for x in spec))
    if isinstance(spec, (tuple, list)):
        return type(spec)(_unflatten(x, tensors) for x in spec)
    if isinstance(spec, dict):
        return {k: _unflatten(v, tensors) for k, v in spec.items()}
    return spec


class _Slot:
    __slots__ = ("index",)

    def __init__(self, index: int):
        self.index = index


def checkpoint(
    function: Callable[..., Any],
    *args: Any,
    use_reentrant: bool | None = None,
    context_fn: Callable[[], Any] | None = None,
    determinism_check: str = "default",
    debug: bool = False,
    early_stop: bool = True,
    preserve_rng_state: bool = True,
    **kwargs: Any,
) -> Any:
    """Runs ``function(*args, **kwargs)`` without keeping its saved values for backward; they are
    recomputed during backward (torch.utils.checkpoint.checkpoint, non-reentrant).

    Tensors among ``args`` are the segment's inputs (gradients flow to them); other arguments and
    ``kwargs`` are passed through unchanged. The output may be a Tensor or any nesting of tuples,
    lists and dicts holding Tensors and other values. ``context_fn`` and ``debug`` are not
    supported (NotImplementedError when given); ``determinism_check`` accepts "default" (the re-run
    must save values of the same number, shapes and dtypes, otherwise backward raises) and "none";
    ``early_stop`` is accepted and ignored (the whole segment always re-runs).
    """
    _check_reentrant(use_reentrant)
    if not callable(function):
        raise TypeError(f"checkpoint: function must be callable, got {type(function).__name__}")
    if context_fn is not None:
        raise NotImplementedError("checkpoint: context_fn is not supported by Strata's checkpoint")
    if debug:
        raise NotImplementedError("checkpoint: debug=True is not supported by Strata's checkpoint")
    if determinism_check not in ("default", "none"):
        raise ValueError(f"checkpoint: determinism_check should be 'default' or 'none', got {determinism_check!r}")
    if not isinstance(preserve_rng_state, bool):
        raise TypeError(f"checkpoint: preserve_rng_state must be a bool, got {type(preserve_rng_state).__name__}")

    positions = [i for i, a in enumerate(args) if isinstance(a, Tensor)]
    structure: list = []

    def segment(*tensors: Tensor) -> list:
        full = list(args)
        for i, t in zip(positions, tensors):
            full[i] = t
        out = function(*full, **kwargs)
        flat: list = []
        spec = _flatten(out, flat)
        if not structure:
            structure.append(spec)  # the first run's structure (and non-Tensor values)
        return flat

    outputs = _C._remat_checkpoint(segment, [args[i] for i in positions], preserve_rng_state)
    return _unflatten(structure[0], outputs)


def checkpoint_sequential(
    functions: Any,
    segments: int,
    input: Tensor,  # noqa: A002 (torch's name)
    use_reentrant: bool | None = None,
    **kwargs: Any,
) -> Any:
    """torch.utils.checkpoint.checkpoint_sequential: runs ``functions`` (a ``Sequential`` or a list
    of callables) on ``input`` in ``segments`` segments of ``len(functions) // segments`` callables,
    each checkpointed but the last, which takes the remainder and runs normally. The only keyword
    argument is ``preserve_rng_state`` (default True)."""
    preserve = kwargs.pop("preserve_rng_state", True)
    if kwargs:
        raise TypeError("Unexpected keyword arguments: " + ",".join(kwargs))
    _check_reentrant(use_reentrant)
    if hasattr(functions, "children") and not isinstance(functions, (list, tuple)):
        functions = list(functions.children())
    elif isinstance(functions, Iterable) and not isinstance(functions, (str, bytes)):
        functions = list(functions)
    else:
        raise TypeError(
            f"checkpoint_sequential: functions must be a Sequential or a list of callables, got {type(functions).__name__}"
        )
    if isinstance(segments, bool) or not isinstance(segments, int):
        raise TypeError(f"checkpoint_sequential: segments must be an int, got {type(segments).__name__}")
    if not functions:
        raise ValueError("checkpoint_sequential: there are no functions to run")
    if segments < 1 or segments > len(functions):
        raise ValueError(
            f"checkpoint_sequential: segments must be in [1, {len(functions)}] (the number of functions), got {segments}"
        )
    for i, f in enumerate(functions):
        if not callable(f):
            raise TypeError(f"checkpoint_sequential: function {i} is {type(f).__name__}, expected a callable")

    def run_function(start: int, end: int):
        def forward(x):
            for j in range(start, end + 1):
                x = functions[j](x)
            return x

        return forward

    segment_size = len(functions) // segments
    end = -1
    for start in range(0, segment_size * (segments - 1), segment_size):
        end = start + segment_size - 1
        input = checkpoint(run_function(start, end), input, use_reentrant=False, preserve_rng_state=preserve)
    return run_function(end + 1, len(functions) - 1)(input)
