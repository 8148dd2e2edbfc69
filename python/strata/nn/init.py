"""strata.nn.init: torch.nn.init's initializations (models/init.h).

Each function fills ``tensor`` in place without recording autograd and returns it. Random ones
draw from ``generator`` (a ``strata.Generator``) or the default generator, so
``strata.manual_seed`` makes them repeatable; the values follow PyTorch's distributions but not
its random stream. Bad arguments raise ValueError with PyTorch's messages.
"""

from __future__ import annotations

import numbers
import re
import warnings

from .. import _C
from .._C import Tensor

__all__ = [
    "calculate_gain",
    "uniform_",
    "normal_",
    "trunc_normal_",
    "constant_",
    "ones_",
    "zeros_",
    "eye_",
    "xavier_uniform_",
    "xavier_normal_",
    "kaiming_uniform_",
    "kaiming_normal_",
    "orthogonal_",
]

_impl = _C.nn.init
_LOCATION = re.compile(r" \([A-Za-z0-9_]+\.(cpp|h):[0-9]+\)$")


def _run(fn, *args):
    """Calls the C++ initialization; its argument errors become ValueError, as PyTorch's are."""
    try:
        return fn(*args)
    except _C.StrataError as e:
        if isinstance(e, (TypeError, ValueError, IndexError)):
            raise
        raise _C.StrataValueError(_LOCATION.sub("", str(e))) from None


def _tensor(tensor, op):
    if not isinstance(tensor, Tensor):
        raise TypeError(f"{op}(): argument 'tensor' must be a strata.Tensor, got {type(tensor).__name__}")
    return tensor


def _number(value, op, name):
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise TypeError(f"{op}(): argument '{name}' must be a number, got {type(value).__name__}")
    return float(value)


def _generator(generator, op):
    if generator is not None and not isinstance(generator, _C.Generator):
        raise TypeError(f"{op}(): generator must be a strata.Generator or None, got {type(generator).__name__}")
    return generator


def calculate_gain(nonlinearity, param=None):
    """The recommended gain for ``nonlinearity`` (PyTorch's table)."""
    if nonlinearity == "leaky_relu" and param is not None:
        if isinstance(param, bool) or not isinstance(param, numbers.Real):
            raise ValueError(f"negative_slope {param} not a valid number")
        param = float(param)
    elif nonlinearity != "leaky_relu":
        param = None
    return _run(_impl.calculate_gain, str(nonlinearity), param)


def uniform_(tensor, a=0.0, b=1.0, generator=None):
    """Fills ``tensor`` with U(a, b)."""
    _run(_impl.uniform_, _tensor(tensor, "uniform_"), _number(a, "uniform_", "a"), _number(b, "uniform_", "b"),
         _generator(generator, "uniform_"))
    return tensor


def normal_(tensor, mean=0.0, std=1.0, generator=None):
    """Fills ``tensor`` with N(mean, std²)."""
    _run(_impl.normal_, _tensor(tensor, "normal_"), _number(mean, "normal_", "mean"), _number(std, "normal_", "std"),
         _generator(generator, "normal_"))
    return tensor


def trunc_normal_(tensor, mean=0.0, std=1.0, a=-2.0, b=2.0, generator=None):
    """Fills ``tensor`` with N(mean, std²) truncated to [a, b]."""
    op = "trunc_normal_"
    mean, std, a, b = (_number(v, op, n) for v, n in ((mean, "mean"), (std, "std"), (a, "a"), (b, "b")))
    if mean < a - 2 * std or mean > b + 2 * std:
        warnings.warn("mean is more than 2 std from [a, b] in nn.init.trunc_normal_. The distribution of values may "
                      "be incorrect.", stacklevel=2)
    _run(_impl.trunc_normal_, _tensor(tensor, op), mean, std, a, b, _generator(generator, op))
    return tensor


def constant_(tensor, val):
    """Fills ``tensor`` with ``val``."""
    _run(_impl.constant_, _tensor(tensor, "constant_"), _number(val, "constant_", "val"))
    return tensor


def ones_(tensor):
    """Fills ``tensor`` with ones."""
    return constant_(tensor, 1.0)


def zeros_(tensor):
    """Fills ``tensor`` with zeros."""
    return constant_(tensor, 0.0)


def eye_(tensor):
    """Fills a 2-D ``tensor`` with the identity matrix."""
    _run(_impl.eye_, _tensor(tensor, "eye_"))
    return tensor


def xavier_uniform_(tensor, gain=1.0, generator=None):
    """Glorot uniform: U(-a, a), a = gain * sqrt(6 / (fan_in + fan_out))."""
    _run(_impl.xavier_uniform_, _tensor(tensor, "xavier_uniform_"), _number(gain, "xavier_uniform_", "gain"),
         _generator(generator, "xavier_uniform_"))
    return tensor


def xavier_normal_(tensor, gain=1.0, generator=None):
    """Glorot normal: N(0, std²), std = gain * sqrt(2 / (fan_in + fan_out))."""
    _run(_impl.xavier_normal_, _tensor(tensor, "xavier_normal_"), _number(gain, "xavier_normal_", "gain"),
         _generator(generator, "xavier_normal_"))
    return tensor


def _kaiming(fn, op, tensor, a, mode, nonlinearity, generator):
    _tensor(tensor, op)
    if 0 in tuple(tensor.shape):
        warnings.warn("Initializing zero-element tensors is a no-op", stacklevel=3)
        return tensor
    _run(fn, tensor, _number(a, op, "a"), str(mode), str(nonlinearity), _generator(generator, op))
    return tensor


def kaiming_uniform_(tensor, a=0, mode="fan_in", nonlinearity="leaky_relu", generator=None):
    """He uniform: U(-bound, bound), bound = gain * sqrt(3 / fan)."""
    return _kaiming(_impl.kaiming_uniform_, "kaiming_uniform_", tensor, a, mode, nonlinearity, generator)


def kaiming_normal_(tensor, a=0, mode="fan_in", nonlinearity="leaky_relu", generator=None):
    """He normal: N(0, std²), std = gain / sqrt(fan)."""
    return _kaiming(_impl.kaiming_normal_, "kaiming_normal_", tensor, a, mode, nonlinearity, generator)


def orthogonal_(tensor, gain=1, generator=None):
    """A (semi-)orthogonal matrix times ``gain`` (trailing dimensions flattened)."""
    _run(_impl.orthogonal_, _tensor(tensor, "orthogonal_"), _number(gain, "orthogonal_", "gain"),
         _generator(generator, "orthogonal_"))
    return tensor
