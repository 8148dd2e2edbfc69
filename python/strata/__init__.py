"""Strata: deep-learning training for tiered memory.

The compiled core lives in ``strata._C``; this package re-exports it under PyTorch's names
(``strata.Tensor``, ``strata.float32``, ``strata.zeros``, ``strata.from_numpy``, ...).
"""

from . import _C
from ._C import (
    StrataError,
    StrataIndexError,
    StrataTypeError,
    StrataValueError,
    Tensor,
    arange,
    as_tensor,
    bf16,
    bfloat16,
    double,
    dtype,
    empty,
    empty_like,
    f32,
    f64,
    float32,
    float64,
    from_numpy,
    full,
    full_like,
    get_num_threads,
    i32,
    i64,
    initial_seed,
    int32,
    int64,
    is_tensor,
    long,
    manual_seed,
    ones,
    ones_like,
    rand,
    randint,
    randn,
    set_num_threads,
    tensor,
    u8,
    uint8,
    zeros,
    zeros_like,
)

# These dtype names shadow Python builtins, so they are attributes (strata.float, strata.int,
# strata.bool) but not part of `from strata import *` — as in PyTorch.
float = _C.float  # noqa: A001
int = _C.int  # noqa: A001
bool = _C.bool  # noqa: A001

from . import autograd  # noqa: E402
from .autograd import enable_grad, is_grad_enabled, no_grad, set_grad_enabled  # noqa: E402
from . import optim  # noqa: E402

__version__ = "0.1.0"

__all__ = [
    "StrataError",
    "StrataIndexError",
    "StrataTypeError",
    "StrataValueError",
    "Tensor",
    "arange",
    "as_tensor",
    "bf16",
    "bfloat16",
    "double",
    "dtype",
    "empty",
    "empty_like",
    "enable_grad",
    "f32",
    "f64",
    "float32",
    "float64",
    "from_numpy",
    "full",
    "full_like",
    "get_num_threads",
    "i32",
    "i64",
    "initial_seed",
    "int32",
    "int64",
    "is_grad_enabled",
    "is_tensor",
    "long",
    "manual_seed",
    "no_grad",
    "ones",
    "ones_like",
    "rand",
    "randint",
    "randn",
    "set_grad_enabled",
    "set_num_threads",
    "tensor",
    "u8",
    "uint8",
    "zeros",
    "zeros_like",
]
