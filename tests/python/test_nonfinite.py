"""Issue 24: NaN and ±inf go through every op of ops/op_list.h as through PyTorch 2.13's (values and
gradients, NaN where PyTorch has NaN, ±inf where it has ±inf), and the opt-in checks that stop at the
first of them: strata.autograd.set_detect_anomaly / detect_anomaly, and the DLRM's check_finite.
The C++ op harness checks the same rules per op (Note [Non-finite cases] in
tests/cpp/ops/harness/op_harness.h)."""

import pathlib
import re

import numpy as np
import pytest
import torch
import torch.nn.functional as TF

import strata
import strata.dlrm
import strata.nn.functional as F

NAN, INF = float("nan"), float("inf")
OP_LIST = pathlib.Path(__file__).resolve().parents[2] / "ops" / "op_list.h"


def nonfinite(*shape, seed=0, shift=0, low=-1.0, high=1.0):
    """Uniform values with NaN, +inf, -inf, +0 and -0 at every 5th, 7th, 11th, 13th and 17th element
    (the harness's with_nonfinite)."""
    a = np.random.default_rng(seed).uniform(low, high, shape).ravel()
    for i in range(a.size):
        k = i + shift
        if k % 5 == 1:
            a[i] = NAN
        elif k % 7 == 2:
            a[i] = INF
        elif k % 11 == 3:
            a[i] = -INF
        elif k % 13 == 4:
            a[i] = 0.0
        elif k % 17 == 5:
            a[i] = -0.0
    return a.reshape(shape)


def finite(*shape, seed=1, low=-1.0, high=1.0):
    return np.random.default_rng(seed).uniform(low, high, shape)


def idx(*values):
    return np.array(values, dtype=np.int64)


def as_list(out):
    return list(out) if isinstance(out, (tuple, list)) else [out]


# op name -> (inputs, strata fn, torch fn). Floating inputs (f64 here; the test runs f32 and f64)
# require grad; integer ones are indices.
CASES = {
    "matmul": ([nonfinite(3, 4), finite(4, 5)], strata.matmul, torch.matmul),
    "linear": ([nonfinite(3, 4), finite(5, 4), nonfinite(5, shift=1)], F.linear, TF.linear),
    "bmm": ([nonfinite(2, 3, 4), finite(2, 4, 2)], strata.bmm, torch.bmm),
    "conv2d": ([nonfinite(1, 2, 5, 5), finite(3, 2, 3, 3), finite(3)], lambda x, w, b: F.conv2d(x, w, b, padding=1),
               lambda x, w, b: TF.conv2d(x, w, b, padding=1)),
    "max_pool2d": ([nonfinite(2, 2, 6, 8)], lambda x: F.max_pool2d(x, 2), lambda x: TF.max_pool2d(x, 2)),
    "max_pool2d/3x3_padding": ([nonfinite(1, 2, 7, 9)], lambda x: F.max_pool2d(x, 3, 2, 1),
                               lambda x: TF.max_pool2d(x, 3, 2, 1)),
    "avg_pool2d": ([nonfinite(2, 2, 6, 8)], lambda x: F.avg_pool2d(x, 2), lambda x: TF.avg_pool2d(x, 2)),
    "adaptive_avg_pool2d": ([nonfinite(2, 2, 6, 8)], lambda x: F.adaptive_avg_pool2d(x, (2, 3)),
                            lambda x: TF.adaptive_avg_pool2d(x, (2, 3))),
    "batch_norm": ([nonfinite(4, 3, 5), finite(3), finite(3)],
                   lambda x, w, b: F.batch_norm(x, None, None, w, b, training=True),
                   lambda x, w, b: TF.batch_norm(x, None, None, w, b, training=True)),
    "layer_norm": ([nonfinite(4, 6), finite(6), finite(6)], lambda x, w, b: F.layer_norm(x, (6,), w, b),
                   lambda x, w, b: TF.layer_norm(x, (6,), w, b)),
    "relu": ([nonfinite(6, 7)], F.relu, TF.relu),
    "leaky_relu": ([nonfinite(6, 7)], lambda x: F.leaky_relu(x, 0.1), lambda x: TF.leaky_relu(x, 0.1)),
    "sigmoid": ([nonfinite(6, 7)], strata.sigmoid, torch.sigmoid),
    "tanh": ([nonfinite(6, 7)], strata.tanh, torch.tanh),
    # +inf is left out of gelu's input: see test_gelu_of_inf.
    "gelu": ([np.where(nonfinite(6, 7) == INF, NAN, nonfinite(6, 7))], F.gelu, TF.gelu),
    "gelu/tanh": ([nonfinite(6, 7)], lambda x: F.gelu(x, approximate="tanh"), lambda x: TF.gelu(x, approximate="tanh")),
    "exp": ([nonfinite(6, 7)], strata.exp, torch.exp),
    "log": ([nonfinite(6, 7)], strata.log, torch.log),
    "sqrt": ([nonfinite(6, 7)], strata.sqrt, torch.sqrt),
    "pow": ([nonfinite(6, 7)], lambda x: strata.pow(x, 2.0), lambda x: torch.pow(x, 2.0)),
    "pow/3": ([nonfinite(6, 7)], lambda x: strata.pow(x, 3.0), lambda x: torch.pow(x, 3.0)),
    "clamp": ([nonfinite(6, 7)], lambda x: strata.clamp(x, -0.5, 0.5), lambda x: torch.clamp(x, -0.5, 0.5)),
    "dropout": ([nonfinite(6, 7)], lambda x: F.dropout(x, 0.5, training=False),
                lambda x: TF.dropout(x, 0.5, training=False)),
    "add": ([nonfinite(6, 7), nonfinite(6, 7, shift=3)], strata.add, torch.add),
    "sub": ([nonfinite(6, 7), nonfinite(6, 7, shift=3)], strata.sub, torch.sub),
    "mul": ([nonfinite(6, 7), nonfinite(6, 7, shift=3)], strata.mul, torch.mul),
    "div": ([nonfinite(6, 7), nonfinite(6, 7, shift=3)], strata.div, torch.div),
    "maximum": ([nonfinite(6, 7), nonfinite(6, 7, shift=3)], strata.maximum, torch.maximum),
    "where": ([finite(6, 7) > 0, nonfinite(6, 7), nonfinite(6, 7, shift=3)], strata.where, torch.where),
    "sum": ([nonfinite(6, 7)], lambda x: strata.sum(x, 1), lambda x: torch.sum(x, 1)),
    "mean": ([nonfinite(6, 7)], lambda x: strata.mean(x, 0), lambda x: torch.mean(x, 0)),
    "amax": ([nonfinite(6, 7)], lambda x: strata.amax(x, 1), lambda x: torch.amax(x, 1)),
    "amax/no_nan": ([np.array([[INF, 1.0, INF], [-INF, -INF, -INF], [0.5, -INF, 0.25]])],
                    lambda x: strata.amax(x, 1), lambda x: torch.amax(x, 1)),
    "reshape": ([nonfinite(6, 7)], lambda x: strata.reshape(x, (7, 6)), lambda x: torch.reshape(x, (7, 6))),
    "transpose": ([nonfinite(6, 7)], lambda x: strata.transpose(x, 0, 1), lambda x: torch.transpose(x, 0, 1)),
    "permute": ([nonfinite(2, 3, 4)], lambda x: strata.permute(x, (2, 0, 1)), lambda x: torch.permute(x, (2, 0, 1))),
    "cat": ([nonfinite(2, 3), nonfinite(4, 3, shift=2)], lambda a, b: strata.cat([a, b]),
            lambda a, b: torch.cat([a, b])),
    "split": ([nonfinite(6, 7)], lambda x: strata.split(x, 2), lambda x: torch.split(x, 2)),
    "slice": ([nonfinite(6, 7)], lambda x: x[1:5:2], lambda x: x[1:5:2]),
    "index_select": ([nonfinite(6, 7), idx(4, 0, 4)], lambda x, i: strata.index_select(x, 0, i),
                     lambda x, i: torch.index_select(x, 0, i)),
    "gather": ([nonfinite(4, 5), idx(0, 4, 4, 1, 2, 2, 3, 0).reshape(4, 2)], lambda x, i: strata.gather(x, 1, i),
               lambda x, i: torch.gather(x, 1, i)),
    "softmax": ([nonfinite(6, 7)], lambda x: F.softmax(x, 1), lambda x: TF.softmax(x, 1)),
    "softmax/dim0": ([nonfinite(6, 7)], lambda x: F.softmax(x, 0), lambda x: TF.softmax(x, 0)),
    "log_softmax": ([nonfinite(6, 7)], lambda x: F.log_softmax(x, 1), lambda x: TF.log_softmax(x, 1)),
    "mse_loss": ([nonfinite(6, 7), nonfinite(6, 7, shift=2)], lambda x, t: F.mse_loss(x, t, reduction="none"),
                 lambda x, t: TF.mse_loss(x, t, reduction="none")),
    "binary_cross_entropy_with_logits": (
        [nonfinite(6, 7), np.random.default_rng(3).integers(0, 2, (6, 7)).astype(np.float64)],
        lambda x, t: F.binary_cross_entropy_with_logits(x, t, reduction="none"),
        lambda x, t: TF.binary_cross_entropy_with_logits(x, t, reduction="none")),
    "cross_entropy": ([nonfinite(7, 4), idx(1, 2, 0, 3, 1, 2, 0)],
                      lambda x, t: F.cross_entropy(x, t, reduction="none"),
                      lambda x, t: TF.cross_entropy(x, t, reduction="none")),
    "nll_loss": ([-np.abs(nonfinite(7, 4)), idx(1, 2, 0, 3, 1, 2, 0)], lambda x, t: F.nll_loss(x, t, reduction="none"),
                 lambda x, t: TF.nll_loss(x, t, reduction="none")),
    "embedding_bag": ([nonfinite(6, 3), idx(1, 5, 1, 0, 3, 2, 2), idx(0, 2, 2, 5), nonfinite(7, shift=4)],
                      lambda w, i, o, p: F.embedding_bag(i, w, o, mode="sum", per_sample_weights=p),
                      lambda w, i, o, p: TF.embedding_bag(i, w, o, mode="sum", per_sample_weights=p)),
    # Issue 26 parts 7-8.
    "silu": ([nonfinite(6, 7)], F.silu, TF.silu),
    "l1_loss": ([nonfinite(6, 7), nonfinite(6, 7, shift=2)], lambda x, t: F.l1_loss(x, t, reduction="none"),
                lambda x, t: TF.l1_loss(x, t, reduction="none")),
    "embedding": ([nonfinite(6, 3), idx(1, 5, 1, 0, 3, 2, 2)], lambda w, i: F.embedding(i, w),
                  lambda w, i: TF.embedding(i, w)),
    # Non-finite values, keys and queries: NaN and +inf scores make their rows NaN, -inf ones drop out.
    "scaled_dot_product_attention/value": (
        [finite(2, 2, 5, 4), finite(2, 2, 5, 4, seed=2), nonfinite(2, 2, 5, 4)],
        lambda q, k, v: F.scaled_dot_product_attention(q, k, v, is_causal=True),
        lambda q, k, v: TF.scaled_dot_product_attention(q, k, v, is_causal=True)),
    "scaled_dot_product_attention/query": (
        [nonfinite(2, 2, 5, 4), finite(2, 2, 5, 4, seed=2), finite(2, 2, 5, 4, seed=3)],
        lambda q, k, v: F.scaled_dot_product_attention(q, k, v),
        lambda q, k, v: TF.scaled_dot_product_attention(q, k, v)),
    "scaled_dot_product_attention/key": (
        [finite(2, 2, 5, 4), nonfinite(2, 2, 5, 4, shift=3), finite(2, 2, 5, 4, seed=3)],
        lambda q, k, v: F.scaled_dot_product_attention(q, k, v, is_causal=True),
        lambda q, k, v: TF.scaled_dot_product_attention(q, k, v, is_causal=True)),
}

# Issue 26 part 1. floor_divide has no derivative in PyTorch (its backward raises): values only.
NO_GRAD = {"floor_divide"}


def one_nan_per_row(rows, cols, seed=4):
    """Distinct finite values with one NaN, one +inf and one -inf per row (no ties: topk's order
    among equal values is not specified)."""
    a = np.random.default_rng(seed).permutation(rows * cols).reshape(rows, cols) / (rows * cols) - 0.5
    for r in range(rows):
        a[r, r % cols], a[r, (r + 2) % cols], a[r, (r + 4) % cols] = NAN, INF, -INF
    return a


def masks(fn):
    return lambda a, b: fn(a > 0, b > 0)


CASES.update({
    "floor_divide": ([nonfinite(6, 7), nonfinite(6, 7, shift=3)], strata.floor_divide, torch.floor_divide),
    "remainder": ([nonfinite(6, 7), nonfinite(6, 7, shift=3)], strata.remainder, torch.remainder),
    "minimum": ([nonfinite(6, 7), nonfinite(6, 7, shift=3)], strata.minimum, torch.minimum),
    "neg": ([nonfinite(6, 7)], strata.neg, torch.neg),
    "abs": ([nonfinite(6, 7)], strata.abs, torch.abs),
    "prod": ([nonfinite(6, 7)], lambda x: strata.prod(x, 1), lambda x: torch.prod(x, 1)),
    "prod/no_zeros": ([np.where(nonfinite(6, 7) == 0, 0.5, nonfinite(6, 7))], lambda x: strata.prod(x, 0),
                      lambda x: torch.prod(x, 0)),
    "amin": ([nonfinite(6, 7)], lambda x: strata.amin(x, 1), lambda x: torch.amin(x, 1)),
    "any": ([nonfinite(6, 7)], lambda x: strata.any(x, 1), lambda x: torch.any(x, 1)),
    "all": ([nonfinite(6, 7)], lambda x: strata.all(x, 0), lambda x: torch.all(x, 0)),
    "argmax": ([nonfinite(6, 7)], lambda x: strata.argmax(x, 1), lambda x: torch.argmax(x, 1)),
    "argmin": ([nonfinite(6, 7)], lambda x: strata.argmin(x, 0), lambda x: torch.argmin(x, 0)),
    "max": ([nonfinite(6, 7)], lambda x: strata.max(x, 1), lambda x: torch.max(x, 1)),
    "min": ([nonfinite(6, 7)], lambda x: strata.min(x, 1), lambda x: torch.min(x, 1)),
    "topk": ([one_nan_per_row(4, 8)], lambda x: strata.topk(x, 4), lambda x: torch.topk(x, 4)),
    "topk/smallest": ([one_nan_per_row(4, 8)], lambda x: strata.topk(x, 4, largest=False),
                      lambda x: torch.topk(x, 4, largest=False)),
    "sort": ([nonfinite(6, 7)], lambda x: strata.sort(x, stable=True), lambda x: torch.sort(x, stable=True)),
    "sort/descending": ([nonfinite(6, 7)], lambda x: strata.sort(x, dim=0, descending=True, stable=True),
                        lambda x: torch.sort(x, dim=0, descending=True, stable=True)),
    "logical_not": ([nonfinite(6, 7)], strata.logical_not, torch.logical_not),
    "bitwise_not": ([nonfinite(6, 7)], lambda x: strata.bitwise_not(x > 0), lambda x: torch.bitwise_not(x > 0)),
})
for _name in ("eq", "ne", "lt", "le", "gt", "ge", "logical_and", "logical_or", "logical_xor"):
    CASES[_name] = ([nonfinite(6, 7), nonfinite(6, 7, shift=3)], getattr(strata, _name), getattr(torch, _name))
for _name in ("bitwise_and", "bitwise_or", "bitwise_xor"):
    CASES[_name] = ([nonfinite(6, 7), nonfinite(6, 7, shift=3)], masks(getattr(strata, _name)),
                    masks(getattr(torch, _name)))

# Issue 26 part 4: element-wise math, statistics, shape transforms and einsum.
for _name in ("sin", "cos", "tan", "asin", "acos", "atan", "sinh", "cosh", "floor", "ceil", "trunc", "round", "sign",
              "expm1", "log1p", "rsqrt", "erf", "square", "reciprocal"):
    CASES[_name] = ([nonfinite(6, 7)], getattr(strata, _name), getattr(torch, _name))
CASES.update({
    "atan2": ([nonfinite(6, 7), nonfinite(6, 7, shift=3)], strata.atan2, torch.atan2),
    "var": ([nonfinite(6, 7)], lambda x: strata.var(x, 1), lambda x: torch.var(x, 1)),
    "std": ([nonfinite(6, 7)], lambda x: strata.std(x, 0), lambda x: torch.std(x, 0)),
    "norm": ([nonfinite(6, 7)], lambda x: strata.norm(x, dim=1), lambda x: torch.norm(x, dim=1)),
    "logsumexp": ([nonfinite(6, 7)], lambda x: strata.logsumexp(x, 1), lambda x: torch.logsumexp(x, 1)),
    "cumsum": ([nonfinite(6, 7)], lambda x: strata.cumsum(x, 1), lambda x: torch.cumsum(x, 1)),
    "stack": ([nonfinite(3, 4), finite(3, 4)], lambda a, b: strata.stack([a, b], 1), lambda a, b: torch.stack([a, b], 1)),
    "chunk": ([nonfinite(6, 7)], lambda x: strata.chunk(x, 3, 1), lambda x: torch.chunk(x, 3, 1)),
    "flip": ([nonfinite(6, 7)], lambda x: strata.flip(x, (0, 1)), lambda x: torch.flip(x, (0, 1))),
    "roll": ([nonfinite(6, 7)], lambda x: strata.roll(x, (2, -3), (0, 1)), lambda x: torch.roll(x, (2, -3), (0, 1))),
    "repeat": ([nonfinite(3, 4)], lambda x: x.repeat(2, 1, 3), lambda x: x.repeat(2, 1, 3)),
    "repeat_interleave": ([nonfinite(6, 7)], lambda x: strata.repeat_interleave(x, 2, 0),
                          lambda x: torch.repeat_interleave(x, 2, 0)),
    "tril": ([nonfinite(6, 7)], lambda x: strata.tril(x, -1), lambda x: torch.tril(x, -1)),
    "triu": ([nonfinite(6, 7)], lambda x: strata.triu(x, 1), lambda x: torch.triu(x, 1)),
    "einsum": ([nonfinite(3, 4), finite(4, 5)], lambda a, b: strata.einsum("ij,jk->ik", a, b),
               lambda a, b: torch.einsum("ij,jk->ik", a, b)),
})


# Issue 26 part 2: indexing (ops/indexing.h, ops/scatter.h). Masks come from the detached input.
_ROWS = idx(0, 5, 2, 1, 3, 4, 0, 1, 2, 3, 4, 5, 1, 0).reshape(2, 7)  # distinct per column (scatter overwrites)
_DUPS = idx(1, 5, 1, 0, 5, 2, 2, 4, 4, 4, 1, 0, 3, 3, 1, 1, 1, 2, 0, 5, 0).reshape(3, 7)
CASES.update({
    "index": ([nonfinite(6, 7), idx(4, 0, 4)], lambda x, i: x[i, 1:5], lambda x, i: x[i, 1:5]),
    "index_put": ([nonfinite(6, 7), nonfinite(3, 7, shift=2), idx(1, 5, 1)],
                  lambda x, v, i: strata.index_put(x, (i,), v, accumulate=True),
                  lambda x, v, i: torch.index_put(x, (i,), v, accumulate=True)),
    "masked_fill": ([nonfinite(6, 7)], lambda x: x.masked_fill(x.detach() > 0, 2.0),
                    lambda x: x.masked_fill(x.detach() > 0, 2.0)),
    "masked_select": ([nonfinite(6, 7)], lambda x: strata.masked_select(x, x.detach() > 0),
                      lambda x: torch.masked_select(x, x.detach() > 0)),
    "nonzero": ([nonfinite(6, 7)], lambda x: strata.nonzero(x.detach()), lambda x: torch.nonzero(x.detach())),
    "one_hot": ([idx(3, 0, 4, 4)], lambda i: F.one_hot(i, 6), lambda i: TF.one_hot(i, 6)),
    "index_add": ([nonfinite(6, 7), nonfinite(3, 7, shift=2), idx(1, 5, 1)],
                  lambda x, s, i: strata.index_add(x, 0, i, s), lambda x, s, i: torch.index_add(x, 0, i, s)),
    "take_along_dim": ([nonfinite(6, 7), idx(6, 0, 6).reshape(1, 3)], lambda x, i: strata.take_along_dim(x, i, dim=1),
                       lambda x, i: torch.take_along_dim(x, i, dim=1)),
    "scatter": ([nonfinite(6, 7), nonfinite(2, 7, shift=2), _ROWS], lambda x, s, i: strata.scatter(x, 0, i, s),
                lambda x, s, i: torch.scatter(x, 0, i, s)),
    "scatter_add": ([nonfinite(6, 7), nonfinite(3, 7, shift=2), _DUPS], lambda x, s, i: strata.scatter_add(x, 0, i, s),
                    lambda x, s, i: torch.scatter_add(x, 0, i, s)),
    "scatter_reduce": ([nonfinite(6, 7), nonfinite(3, 7, shift=2), _DUPS],
                       lambda x, s, i: strata.scatter_reduce(x, 0, i, s, "sum", include_self=False),
                       lambda x, s, i: torch.scatter_reduce(x, 0, i, s, "sum", include_self=False)),
    "scatter_reduce/mean": ([nonfinite(6, 7), nonfinite(3, 7, shift=2), _DUPS],
                            lambda x, s, i: strata.scatter_reduce(x, 0, i, s, "mean"),
                            lambda x, s, i: torch.scatter_reduce(x, 0, i, s, "mean")),
})


def torch_dot_interaction(features, itself):
    """The DLRM reference's interact_features (op dot): bmm, then the lower triangle."""
    t = torch.stack(features, 1)
    z = torch.bmm(t, t.transpose(1, 2))
    n = len(features)
    li, lj = zip(*[(i, j) for i in range(n) for j in range(i + (1 if itself else 0))])
    return torch.cat([features[0], z[:, list(li), list(lj)]], 1)


for _itself in (False, True):
    CASES["dot_interaction" + ("/self" if _itself else "")] = (
        [nonfinite(3, 5), finite(3, 5), finite(3, 5, seed=2), nonfinite(3, 5, shift=9)],
        lambda *f, s=_itself: strata.dot_interaction(list(f), s),
        lambda *f, s=_itself: torch_dot_interaction(list(f), s))


# Issue 26 part 7: conv1d, conv_transpose2d, group_norm, normalize, pad, interpolate.
CASES.update({
    "conv1d": ([nonfinite(2, 2, 9), finite(3, 2, 3), finite(3)], lambda x, w, b: F.conv1d(x, w, b, padding=1),
               lambda x, w, b: TF.conv1d(x, w, b, padding=1)),
    "conv_transpose2d": ([nonfinite(1, 2, 4, 4), finite(2, 3, 3, 3), finite(3)],
                         lambda x, w, b: F.conv_transpose2d(x, w, b, stride=2, padding=1),
                         lambda x, w, b: TF.conv_transpose2d(x, w, b, stride=2, padding=1)),
    "group_norm": ([nonfinite(2, 4, 5), finite(4), finite(4)], lambda x, w, b: F.group_norm(x, 2, w, b),
                   lambda x, w, b: TF.group_norm(x, 2, w, b)),
    "normalize": ([nonfinite(4, 6)], lambda x: F.normalize(x, dim=1), lambda x: TF.normalize(x, dim=1)),
    "pad": ([nonfinite(2, 3, 5)], lambda x: F.pad(x, (1, 2), mode="reflect"),
            lambda x: TF.pad(x, (1, 2), mode="reflect")),
    "interpolate": ([nonfinite(1, 2, 3, 4)],
                    lambda x: F.interpolate(x, scale_factor=2, mode="bilinear", align_corners=False),
                    lambda x: TF.interpolate(x, scale_factor=2, mode="bilinear", align_corners=False)),
})

def test_every_op_of_the_op_list_has_a_case():
    ops = re.findall(r"^\s*X\((\w+),", OP_LIST.read_text(), re.M)
    assert len(ops) > 40
    covered = {name.split("/")[0] for name in CASES} | {"binary_cross_entropy"}  # its own test below
    assert sorted(set(ops) - covered) == []


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("name", sorted(CASES))
def test_nonfinite_values_and_gradients_match_pytorch(name, dtype):
    arrays, fn_s, fn_t = CASES[name]
    s_in, t_in = [], []
    for a in arrays:
        floating = np.issubdtype(a.dtype, np.floating)
        a = a.astype(dtype) if floating else a
        s_in.append(strata.tensor(a).requires_grad_(floating))
        t_in.append(torch.tensor(a, requires_grad=floating))
    out_s, out_t = as_list(fn_s(*s_in)), as_list(fn_t(*t_in))
    tol = dict(rtol=1e-4, atol=1e-5) if dtype == np.float32 else dict(rtol=1e-9, atol=1e-10)
    assert len(out_s) == len(out_t)
    for k, (o_s, o_t) in enumerate(zip(out_s, out_t)):
        assert str(o_s.dtype).split(".")[1] == str(o_t.dtype).split(".")[1], f"{name} output {k}"
        np.testing.assert_allclose(o_s.numpy().astype(np.float64), o_t.detach().numpy().astype(np.float64),
                                   equal_nan=True, err_msg=f"{name} output {k}", **tol)
    # The same finite cotangent through both, for the outputs that require grad (not indices or masks).
    pairs = [(o_s, o_t) for o_s, o_t in zip(out_s, out_t) if o_t.requires_grad]
    assert [o_s.requires_grad for o_s, _ in pairs] == [True] * len(pairs)
    if not pairs or name in NO_GRAD:
        return
    rng = np.random.default_rng(7)
    cot = [rng.uniform(0.5, 1.5, tuple(o_t.shape)).astype(dtype) for _, o_t in pairs]
    strata.autograd.backward([o for o, _ in pairs], [strata.tensor(c) for c in cot])
    torch.autograd.backward([o for _, o in pairs], [torch.tensor(c) for c in cot])
    for i, (x_s, x_t) in enumerate(zip(s_in, t_in)):
        if x_t.grad is None:
            continue
        np.testing.assert_allclose(x_s.grad.numpy(), x_t.grad.numpy(), equal_nan=True,
                                   err_msg=f"{name} gradient of input {i}", **tol)


def test_binary_cross_entropy_refuses_nan_as_pytorch_does():
    # PyTorch's binary_cross_entropy raises for inputs outside [0, 1], NaN included; so does Strata's.
    x = np.array([0.0, 1.0, 0.25, NAN])
    t = np.array([1.0, 0.0, 1.0, 1.0])
    with pytest.raises(RuntimeError, match="between 0 and 1"):
        TF.binary_cross_entropy(torch.tensor(x), torch.tensor(t), reduction="none")
    with pytest.raises(strata.StrataError, match="between 0 and 1"):
        F.binary_cross_entropy(strata.tensor(x), strata.tensor(t), reduction="none")
    # At the ends of [0, 1] the log is clamped at -100, as in PyTorch.
    xs = strata.tensor(x[:3]).requires_grad_()
    xt = torch.tensor(x[:3], requires_grad=True)
    ls = F.binary_cross_entropy(xs, strata.tensor(t[:3]), reduction="none")
    lt = TF.binary_cross_entropy(xt, torch.tensor(t[:3]), reduction="none")
    np.testing.assert_allclose(ls.numpy(), lt.detach().numpy(), rtol=1e-12)
    ls.sum().backward()
    lt.sum().backward()
    np.testing.assert_allclose(xs.grad.numpy(), xt.grad.numpy(), rtol=1e-6)


def test_gelu_of_inf():
    # The one difference left: PyTorch's vectorized f32 gelu gives NaN at +inf, while its f64 kernel
    # and its f32 scalar tail (and Strata, in both dtypes) give inf, the limit. The gradient there
    # is NaN in all of them (1 + inf * 0).
    for dtype in (np.float32, np.float64):
        x = strata.tensor(np.array([INF, -INF], dtype=dtype)).requires_grad_()
        y = F.gelu(x)
        assert y.numpy()[0] == INF and np.isnan(y.numpy()[1])
        y.backward(strata.ones(2, dtype=strata.float32 if dtype == np.float32 else strata.float64))
        assert np.isnan(x.grad.numpy()).all()
    assert np.isnan(TF.gelu(torch.full((16,), INF, dtype=torch.float32)).numpy()).all()
    assert TF.gelu(torch.tensor([INF], dtype=torch.float32)).item() == INF
    assert (TF.gelu(torch.full((16,), INF, dtype=torch.float64)).numpy() == INF).all()


def test_relu_of_nan_is_nan_and_passes_its_gradient():
    # The known bug of issue 24: relu(NaN) was 0.
    x = strata.tensor(np.array([NAN, -INF, INF, -1.0, 0.0, 2.0], dtype=np.float32)).requires_grad_()
    y = F.relu(x)
    assert np.isnan(y.numpy()[0])
    np.testing.assert_array_equal(y.numpy()[1:], [0.0, INF, 0.0, 0.0, 2.0])
    y.backward(strata.ones(6))
    np.testing.assert_array_equal(x.grad.numpy(), [1.0, 0.0, 1.0, 0.0, 0.0, 1.0])  # torch 2.13's


# ---- anomaly detection ----------------------------------------------------------------------------

def test_anomaly_mode_flag_and_context_managers():
    assert not strata.autograd.is_anomaly_enabled() and not strata.is_anomaly_enabled()
    with strata.autograd.detect_anomaly():
        assert strata.autograd.is_anomaly_enabled() and strata.autograd.is_anomaly_check_nan_enabled()
        with strata.autograd.detect_anomaly(check_nan=False):
            assert strata.autograd.is_anomaly_enabled() and not strata.autograd.is_anomaly_check_nan_enabled()
        assert strata.autograd.is_anomaly_check_nan_enabled()
    assert not strata.autograd.is_anomaly_enabled()
    strata.autograd.set_detect_anomaly(True)
    try:
        assert strata.autograd.is_anomaly_enabled()
    finally:
        strata.autograd.set_detect_anomaly(False)
    assert not strata.autograd.is_anomaly_enabled()
    with strata.autograd.set_detect_anomaly(True):
        assert strata.autograd.is_anomaly_enabled()
    assert not strata.autograd.is_anomaly_enabled()
    with pytest.raises(TypeError):
        strata.autograd.set_detect_anomaly("yes")


def test_anomaly_backward_names_the_node_and_the_parameter():
    w = strata.tensor(np.array([4.0, 0.0, 1.0])).requires_grad_()
    y = strata.sqrt(w)  # finite forward, inf gradient at 0
    with strata.autograd.detect_anomaly():
        with pytest.raises(strata.StrataError) as e:
            y.sum().backward()
    msg = str(e.value)
    assert "Function 'SqrtBackward' returned inf values in its 0th output" in msg
    assert "a leaf that requires grad (a parameter, Tensor[3] f64)" in msg
    assert w.grad is None
    # Off: the same backward gives inf silently, as PyTorch's.
    strata.sqrt(w).sum().backward()
    assert np.isinf(w.grad.numpy()[1])


def test_anomaly_forward_names_the_first_op_and_its_data_input():
    model = strata.nn.Sequential(strata.nn.Linear(4, 3), strata.nn.ReLU(), strata.nn.Linear(3, 2))
    x = np.ones((2, 4), dtype=np.float32)
    x[1, 2] = NAN
    with strata.autograd.detect_anomaly():
        with pytest.raises(strata.StrataError) as e:
            model(strata.tensor(x))
    msg = str(e.value)
    assert "the forward of 'LinearBackward' produced nan values in its 0th output" in msg
    assert "input 0 (Tensor[2, 4] f32, not computed by a recorded op: data) already held 1 NaN" in msg
    model(strata.tensor(x))  # off again: no error


# ---- DLRM ----------------------------------------------------------------------------------------

DLRM_ARGS = dict(arch_sparse_feature_size=4, arch_embedding_size=[10, 7, 5], arch_mlp_bot=[5, 8, 4],
                 arch_mlp_top=[6, 1], learning_rate=0.1)


def dlrm_batch(seed=0, b=3):
    rng = np.random.default_rng(seed)
    dense = rng.uniform(0, 1, (b, 5)).astype(np.float32)
    indices = [rng.integers(0, r, 2 * b).astype(np.int64) for r in (10, 7, 5)]
    offsets = [np.arange(0, 2 * b + 1, 2, dtype=np.int64) for _ in range(3)]
    targets = rng.integers(0, 2, (b, 1)).astype(np.float32)
    return dense, indices, offsets, targets


def test_dlrm_nan_dense_feature_gives_a_nan_loss():
    m = strata.dlrm.DLRM(**DLRM_ARGS)
    dense, indices, offsets, targets = dlrm_batch()
    dense[0, 1] = NAN
    assert np.isnan(m.train_step(dense, indices, offsets, targets))


def test_dlrm_check_finite_names_the_parameter_and_step():
    m = strata.dlrm.DLRM(check_finite=True, **DLRM_ARGS)
    dense, indices, offsets, targets = dlrm_batch()
    assert np.isfinite(m.train_step(dense, indices, offsets, targets))
    dense[0, 1] = NAN
    with pytest.raises(strata.StrataError, match=r"--check-finite: after step 2, parameter bot_l\.0\.weight "
                                                 r"\(Tensor\[8, 5\] f32\) went non-finite"):
        m.train_step(dense, indices, offsets, targets)
