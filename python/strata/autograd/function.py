"""Custom differentiable functions (torch.autograd.Function): subclass ``Function`` with static
``forward(ctx, *args)`` and ``backward(ctx, *grads)`` and call ``.apply(*args)``.

The Python side is the class protocol (``ctx``, static methods, outputs packed and unpacked); the
mechanism is C++ (ops/custom_function.h, Note [Custom functions]): the node that calls
``backward``, the saved values with their version checks, dirty and non-differentiable outputs, and
the checks on what ``backward`` returns (their number, positions, shapes and dtypes)."""

import functools
import inspect
import warnings

from .. import _C
from .grad_mode import no_grad

_Tensor = _C.Tensor


class FunctionCtx:
    """The ``ctx`` that ``forward`` and ``backward`` receive. Any attribute may be set on it in
    ``forward`` and read in ``backward``."""

    def __init__(self, needs_input_grad=()):
        self.needs_input_grad = needs_input_grad
        self._to_save = ()
        self._dirty = ()
        self._non_differentiable = ()
        self._materialize_grads = True
        self._handle = None

    def save_for_backward(self, *tensors):
        """Saves tensors (or None) for ``backward``, which reads them as ``ctx.saved_tensors``; one
        modified in place before backward makes backward raise."""
        for i, t in enumerate(tensors):
            if t is not None and not isinstance(t, _Tensor):
                raise TypeError(f"save_for_backward can only save variables, but argument {i} is of type "
                                f"{type(t).__name__}")
        self._to_save = tensors

    @property
    def saved_tensors(self):
        """What ``save_for_backward`` saved, as a tuple."""
        if self._handle is None:
            return tuple(self._to_save)
        return self._handle.saved_tensors()

    def mark_dirty(self, *tensors):
        """Declares inputs that ``forward`` modified in place; they must be returned as outputs."""
        self._dirty = tensors

    def mark_non_differentiable(self, *tensors):
        """Declares outputs that get no gradient (their gradient in ``backward`` is zeros)."""
        self._non_differentiable = tensors

    def set_materialize_grads(self, value):
        """With False, ``backward`` receives None (not zeros) for outputs that got no gradient."""
        self._materialize_grads = bool(value)


class Function:
    """Base class of custom differentiable functions (torch.autograd.Function).

    Example::

        class Exp(strata.autograd.Function):
            @staticmethod
            def forward(ctx, x):
                y = x.exp()
                ctx.save_for_backward(y)
                return y

            @staticmethod
            def backward(ctx, grad):
                y, = ctx.saved_tensors
                return grad * y

        y = Exp.apply(x)

    ``forward`` runs with grad mode off; it may take non-tensor arguments and return a tensor or a
    tuple (non-tensor entries pass through). ``backward`` gets one gradient per output and returns
    one per argument (None for a non-tensor argument or one needing no gradient). The other form,
    ``forward(*args)`` with ``setup_context(ctx, inputs, output)``, works as PyTorch's."""

    def __init__(self, *args, **kwargs):
        warnings.warn(f"{type(self)} should not be instantiated. Methods on autograd functions are all static, "
                      "so you should invoke them on the class itself.", DeprecationWarning, stacklevel=2)

    def __call__(self, *args, **kwargs):
        raise RuntimeError(f"{type(self).__name__}: call {type(self).__name__}.apply(...); custom Functions have "
                           "static forward and backward methods and are not called as instances")

    @staticmethod
    def forward(ctx, *args, **kwargs):
        raise NotImplementedError("You must implement the forward function for custom autograd.Function.")

    @staticmethod
    def setup_context(ctx, inputs, output):
        raise NotImplementedError("setup_context is not implemented.")

    @staticmethod
    def backward(ctx, *grad_outputs):
        raise NotImplementedError("You must implement either the backward or vjp method for your custom "
                                  "autograd.Function to use it with backward mode AD.")

    @classmethod
    def apply(cls, *args, **kwargs):
        if kwargs:
            args = _bind_arguments(cls, args, kwargs)
        inputs = [a if isinstance(a, _Tensor) else None for a in args]
        ctx = FunctionCtx(_C._needs_input_grad(inputs))
        with no_grad():
            if _overrides_setup_context(cls):
                out = cls.forward(*args)
                cls.setup_context(ctx, args, out)
            else:
                out = cls.forward(ctx, *args)
        outs = out if isinstance(out, tuple) else (out,)
        is_tensor = tuple(isinstance(o, _Tensor) for o in outs)
        recorded, ctx._handle = _C._record_function(
            cls.__name__ + "Backward", inputs, [o for o in outs if isinstance(o, _Tensor)], ctx._dirty,
            ctx._non_differentiable, ctx._to_save, ctx._materialize_grads, _backward_caller(cls, ctx, is_tensor))
        result = _merge_outputs(outs, recorded, ctx._dirty)
        return result if isinstance(out, tuple) else result[0]


def _overrides_setup_context(cls):
    return getattr(cls.setup_context, "__func__", cls.setup_context) is not Function.setup_context


def _bind_arguments(cls, args, kwargs):
    """Keyword arguments of apply, as positional ones in forward's order."""
    params = list(inspect.signature(cls.forward).parameters.values())
    if not _overrides_setup_context(cls):
        params = params[1:]  # ctx
    bound = inspect.Signature(params).bind(*args, **kwargs)
    bound.apply_defaults()
    return tuple(bound.arguments[p.name] for p in params)


def _merge_outputs(outs, recorded, dirty):
    """The forward's outputs with each tensor replaced by its recorded handle; a dirty input is
    returned as the object it is (its history was rewritten in place)."""
    recorded = iter(recorded)
    merged = []
    for o in outs:
        if isinstance(o, _Tensor):
            new = next(recorded)
            merged.append(o if any(o is d for d in dirty) else new)
        else:
            merged.append(o)
    return tuple(merged)


def _backward_caller(cls, ctx, is_tensor):
    """What the C++ node calls: gradients of the tensor outputs → backward's results as a tuple."""

    def call(grads):
        grads = iter(grads)
        full = [next(grads) if t else None for t in is_tensor]
        result = cls.backward(ctx, *full)
        return tuple(result) if isinstance(result, (tuple, list)) else (result,)

    return call


def once_differentiable(fn):
    """Decorator for ``backward`` (torch.autograd.function.once_differentiable). Strata records no
    graph during backward (double backward is not supported), so it only runs ``fn`` with grad mode
    off."""

    @functools.wraps(fn)
    def wrapper(ctx, *args):
        with no_grad():
            return fn(ctx, *args)

    return wrapper


__all__ = ["Function", "FunctionCtx", "once_differentiable"]
