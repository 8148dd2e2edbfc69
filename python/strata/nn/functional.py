"""strata.nn.functional: torch.nn.functional's names and signatures over Strata's ops.

Arguments the ops do not support raise NotImplementedError naming the argument; none is silently
ignored."""

import builtins

from .. import _C
from .._C import Tensor

__all__ = [
    "adaptive_avg_pool2d", "avg_pool2d", "batch_norm", "binary_cross_entropy",
    "binary_cross_entropy_with_logits", "conv2d", "cross_entropy", "dropout", "embedding_bag",
    "flatten", "gelu", "layer_norm", "leaky_relu", "linear", "log_softmax", "max_pool2d", "mse_loss",
    "nll_loss", "relu", "sigmoid", "softmax", "tanh",
    "embedding", "l1_loss", "scaled_dot_product_attention", "silu",
    # issue 26 part 7
    "conv1d", "conv_transpose2d", "group_norm", "interpolate", "normalize", "pad",
]


def _unsupported(fn, arg, value=None):
    detail = "" if value is None else f"={value!r}"
    raise NotImplementedError(f"{fn}(): the argument '{arg}{detail}' is not supported by Strata")


def _legacy(fn, size_average, reduce):
    if size_average is not None:
        _unsupported(fn, "size_average")
    if reduce is not None:
        _unsupported(fn, "reduce")


def _maybe_inplace(input, compute, inplace):
    """compute(input), or with inplace=True: compute on a (recorded) copy, so a value the op saves is
    not the storage being overwritten, then copy_ the result into input (which checks the leaf
    rule and records the copy) and return input."""
    if not inplace:
        return compute(input)
    return input.copy_(compute(input.clone()))


def linear(input, weight, bias=None):
    return _C.linear(input, weight, bias)


def conv2d(input, weight, bias=None, stride=1, padding=0, dilation=1, groups=1):
    return _C.conv2d(input, weight, bias, stride, padding, dilation, groups)


def relu(input, inplace=False):
    if inplace:
        return input.relu_()
    return _C.relu(input)


def leaky_relu(input, negative_slope=0.01, inplace=False):
    return _maybe_inplace(input, lambda x: _C.leaky_relu(x, negative_slope), inplace)


def sigmoid(input):
    return _C.sigmoid(input)


def tanh(input):
    return _C.tanh(input)


def gelu(input, approximate="none"):
    return _C.gelu(input, approximate=approximate)


def dropout(input, p=0.5, training=True, inplace=False):
    if not isinstance(p, (builtins.int, builtins.float)) or isinstance(p, builtins.bool):
        raise TypeError(f"dropout(): p must be a number, got {type(p).__name__}")
    if p < 0.0 or p > 1.0:
        raise ValueError(f"dropout probability has to be between 0 and 1, but got {p}")
    return _maybe_inplace(input, lambda x: _C.dropout(x, p, training), inplace)


def batch_norm(input, running_mean, running_var, weight=None, bias=None, training=False, momentum=0.1,
               eps=1e-05):
    if momentum is None:
        _unsupported("batch_norm", "momentum", None)
    return _C.batch_norm(input, running_mean, running_var, weight, bias, training, momentum, eps)


def layer_norm(input, normalized_shape, weight=None, bias=None, eps=1e-05):
    return _C.layer_norm(input, normalized_shape, weight, bias, eps)


def max_pool2d(input, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False, return_indices=False):
    if return_indices:
        _unsupported("max_pool2d", "return_indices", True)
    return _C.max_pool2d(input, kernel_size, stride, padding, dilation, ceil_mode)


def avg_pool2d(input, kernel_size, stride=None, padding=0, ceil_mode=False, count_include_pad=True,
               divisor_override=None):
    if divisor_override is not None:
        _unsupported("avg_pool2d", "divisor_override", divisor_override)
    return _C.avg_pool2d(input, kernel_size, stride, padding, ceil_mode, count_include_pad)


def adaptive_avg_pool2d(input, output_size):
    return _C.adaptive_avg_pool2d(input, output_size)


def _softmax_dim(fn, input, dim):
    if dim is None:
        # PyTorch's legacy implicit choice (with a deprecation warning there): 0 for 0-, 1- and 3-D.
        dim = 0 if input.dim() in (0, 1, 3) else 1
    return dim


def softmax(input, dim=None, _stacklevel=3, dtype=None):
    return _C.softmax(input, _softmax_dim("softmax", input, dim), dtype)


def log_softmax(input, dim=None, _stacklevel=3, dtype=None):
    return _C.log_softmax(input, _softmax_dim("log_softmax", input, dim), dtype)


def mse_loss(input, target, size_average=None, reduce=None, reduction="mean", weight=None):
    _legacy("mse_loss", size_average, reduce)
    if weight is not None:
        _unsupported("mse_loss", "weight")
    return _C.mse_loss(input, target, reduction)


def binary_cross_entropy(input, target, weight=None, size_average=None, reduce=None, reduction="mean"):
    _legacy("binary_cross_entropy", size_average, reduce)
    return _C.binary_cross_entropy(input, target, weight, reduction)


def binary_cross_entropy_with_logits(input, target, weight=None, size_average=None, reduce=None,
                                     reduction="mean", pos_weight=None):
    _legacy("binary_cross_entropy_with_logits", size_average, reduce)
    return _C.binary_cross_entropy_with_logits(input, target, weight, reduction, pos_weight)


def cross_entropy(input, target, weight=None, size_average=None, ignore_index=-100, reduce=None,
                  reduction="mean", label_smoothing=0.0):
    _legacy("cross_entropy", size_average, reduce)
    return _C.cross_entropy(input, target, weight, ignore_index, reduction, label_smoothing)


def nll_loss(input, target, weight=None, size_average=None, ignore_index=-100, reduce=None, reduction="mean"):
    _legacy("nll_loss", size_average, reduce)
    return _C.nll_loss(input, target, weight, ignore_index, reduction)


def embedding_bag(input, weight, offsets=None, max_norm=None, norm_type=2, scale_grad_by_freq=False,
                  mode="mean", sparse=False, per_sample_weights=None, include_last_offset=False,
                  padding_idx=None):
    """Sums or averages bags of rows of ``weight``. ``input`` is 1-D with ``offsets`` (bag starts) or
    2-D [B, N] without (each row a bag of N). PyTorch's default mode is 'mean'."""
    if max_norm is not None:
        _unsupported("embedding_bag", "max_norm", max_norm)
    if scale_grad_by_freq:
        _unsupported("embedding_bag", "scale_grad_by_freq", True)
    if sparse:
        _unsupported("embedding_bag", "sparse", True)
    if padding_idx is not None:
        _unsupported("embedding_bag", "padding_idx", padding_idx)
    if not isinstance(input, Tensor):
        raise TypeError(f"embedding_bag(): argument 'input' must be Tensor, not {type(input).__name__}")
    if not isinstance(weight, Tensor):
        raise TypeError(f"embedding_bag(): argument 'weight' must be Tensor, not {type(weight).__name__}")
    if weight.dim() != 2:
        raise ValueError(f"embedding_bag(): weight has to be a 2-D Tensor, but got Tensor of dimension {weight.dim()}")
    if mode not in ("sum", "mean", "max"):
        raise ValueError(f"embedding_bag(): mode has to be one of sum, mean or max, got {mode!r}")
    if per_sample_weights is not None and mode != "sum":
        raise NotImplementedError(
            f"embedding_bag(): per_sample_weights was not None. per_sample_weights is only supported for "
            f"mode='sum' (got mode={mode!r}). Please open a feature request on GitHub.")
    if input.dim() == 2:
        if offsets is not None:
            raise ValueError("embedding_bag(): if input is 2-D, then offsets has to be None, as input is treated "
                             "as a mini-batch of fixed length sequences")
        if include_last_offset:
            raise ValueError("embedding_bag(): include_last_offset requires 1-D input with offsets")
        bags, length = input.shape
        offsets = _C.arange(0, bags * length, builtins.max(length, 1), dtype=input.dtype)
        if length == 0:
            offsets = _C.zeros(bags, dtype=input.dtype)
        input = input.reshape(-1)
        if per_sample_weights is not None:
            per_sample_weights = per_sample_weights.reshape(-1)
    elif input.dim() == 1:
        if offsets is None:
            raise ValueError("embedding_bag(): offsets has to be a 1-D Tensor but got None")
        if not isinstance(offsets, Tensor) or offsets.dim() != 1:
            raise ValueError("embedding_bag(): offsets has to be a 1-D Tensor")
    else:
        raise ValueError(f"embedding_bag(): input has to be 1-D or 2-D Tensor, but got Tensor of dimension "
                         f"{input.dim()}")
    return _C._embedding_bag(weight, input, offsets, mode, per_sample_weights, include_last_offset)


def flatten(input, start_dim=0, end_dim=-1):
    return _C.flatten(input, start_dim, end_dim)


# ---- issue 26 parts 7-8 ------------------------------------------------------------------------------


def silu(input, inplace=False):
    return _maybe_inplace(input, _C.silu, inplace)


def l1_loss(input, target, size_average=None, reduce=None, reduction="mean", weight=None):
    _legacy("l1_loss", size_average, reduce)
    if weight is not None:
        _unsupported("l1_loss", "weight")
    return _C.l1_loss(input, target, reduction)


def embedding(input, weight, padding_idx=None, max_norm=None, norm_type=2.0, scale_grad_by_freq=False,
              sparse=False):
    """Rows of ``weight`` picked by the integer tensor ``input``. With ``max_norm`` the looked-up rows of
    ``weight`` are first renormalized in place, as PyTorch does."""
    if scale_grad_by_freq:
        _unsupported("embedding", "scale_grad_by_freq", True)
    if sparse:
        _unsupported("embedding", "sparse", True)
    if not isinstance(weight, Tensor):
        raise TypeError(f"embedding(): argument 'weight' must be Tensor, not {type(weight).__name__}")
    if padding_idx is not None:
        rows = weight.shape[0]
        if padding_idx > 0:
            if padding_idx >= rows:
                raise AssertionError("Padding_idx must be within num_embeddings")
        elif padding_idx < 0:
            if padding_idx < -rows:
                raise AssertionError("Padding_idx must be within num_embeddings")
            padding_idx = rows + padding_idx
    if max_norm is not None:
        from ..autograd import no_grad

        with no_grad():
            _C._embedding_renorm_(weight, input, max_norm, norm_type)
    return _C.embedding(weight, input, padding_idx)


def scaled_dot_product_attention(query, key, value, attn_mask=None, dropout_p=0.0, is_causal=False, scale=None,
                                 enable_gqa=False):
    """softmax(query·keyᵀ·scale + mask)·value, fused: blocked with an online softmax, saving only q, k,
    v, the output and one log-sum-exp per row (ops/attention.h)."""
    if enable_gqa:
        _unsupported("scaled_dot_product_attention", "enable_gqa", True)
    return _C.scaled_dot_product_attention(query, key, value, attn_mask, dropout_p, is_causal, scale=scale)


def one_hot(tensor, num_classes=-1):
    return _C.one_hot(tensor, num_classes)


# ---- issue 26 part 7 (python/src/nn_extra_bindings.cpp) ----------------------------------------

def conv1d(input, weight, bias=None, stride=1, padding=0, dilation=1, groups=1):
    return _C.conv1d(input, weight, bias, stride, padding, dilation, groups)


def conv_transpose2d(input, weight, bias=None, stride=1, padding=0, output_padding=0, groups=1, dilation=1):
    return _C.conv_transpose2d(input, weight, bias, stride, padding, output_padding, groups, dilation)


def group_norm(input, num_groups, weight=None, bias=None, eps=1e-05):
    return _C.group_norm(input, num_groups, weight, bias, eps)


def pad(input, pad, mode="constant", value=None):
    return _C.pad(input, pad, mode, value)


def interpolate(input, size=None, scale_factor=None, mode="nearest", align_corners=None,
                recompute_scale_factor=None, antialias=False):
    return _C.interpolate(input, size, scale_factor, mode, align_corners, recompute_scale_factor, antialias)


def normalize(input, p=2.0, dim=1, eps=1e-12, out=None):
    return _C.normalize(input, p, dim, eps, out)
