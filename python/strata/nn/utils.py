"""strata.nn.utils: gradient clipping with torch.nn.utils' names (models/clip_grad.h)."""

from __future__ import annotations

import numbers
from collections.abc import Iterable

from .. import _C
from .._C import Tensor

__all__ = ["clip_grad_norm_", "clip_grad_value_"]


def _params(parameters, op):
    if isinstance(parameters, Tensor):
        return [parameters]
    if not isinstance(parameters, Iterable):
        raise TypeError(f"{op}(): parameters must be a Tensor or an iterable of Tensors, got "
                        f"{type(parameters).__name__}")
    out = list(parameters)
    for p in out:
        if not isinstance(p, Tensor):
            raise TypeError(f"{op}(): parameters must hold Tensors, got {type(p).__name__}")
    return out


def _float(value, op, name):
    if isinstance(value, bool) or not isinstance(value, (numbers.Real, str, Tensor)):
        raise TypeError(f"{op}(): {name} must be a number, got {type(value).__name__}")
    try:
        return float(value)
    except ValueError:
        raise ValueError(f"{op}(): {name} must be a number, got {value!r}") from None


def clip_grad_norm_(parameters, max_norm, norm_type=2.0, error_if_nonfinite=False, foreach=None):
    """Scales the gradients of ``parameters`` in place so that their total ``norm_type``-norm is at
    most ``max_norm``; returns the total norm (a 0-d tensor). ``foreach`` is accepted and ignored
    (one fused loop per gradient)."""
    op = "clip_grad_norm_"
    return _C.nn._clip_grad_norm_(_params(parameters, op), _float(max_norm, op, "max_norm"),
                                  _float(norm_type, op, "norm_type"), bool(error_if_nonfinite))


def clip_grad_value_(parameters, clip_value, foreach=None):
    """Clamps the gradients of ``parameters`` in place to [-clip_value, clip_value]."""
    op = "clip_grad_value_"
    _C.nn._clip_grad_value_(_params(parameters, op), _float(clip_value, op, "clip_value"))
