"""``strata.autograd.gradcheck`` (torch.autograd.gradcheck): compares the gradients autograd
computes (through the C++ engine, one backward per output element) with central finite
differences of the function (run under no_grad), for every input that requires grad. Use float64
inputs: in float32 the finite differences are too coarse for the default tolerances."""

import warnings

import numpy as np

from .. import _C
from .grad_mode import no_grad

_Tensor = _C.Tensor


class GradcheckError(RuntimeError):
    """Raised by gradcheck when the analytical and numerical gradients disagree
    (torch.autograd.gradcheck.GradcheckError)."""


def _as_tuple(x):
    return x if isinstance(x, tuple) else (x,)


def _differentiable_outputs(func, inputs):
    outputs = _as_tuple(func(*inputs))
    for i, o in enumerate(outputs):
        if not isinstance(o, _Tensor):
            raise TypeError(f"gradcheck: output {i} of the function is {type(o).__name__}, not a Tensor")
    return tuple(o for o in outputs if o.dtype.is_floating_point)


def _numerical_jacobians(func, inputs, wrt, eps):
    """jac[out][j]: an (input j's numel, output's numel) array of central differences."""
    with no_grad():
        reference = _differentiable_outputs(func, inputs)
        jac = [[np.zeros((inputs[j].numel(), o.numel())) for j in wrt] for o in reference]
        for col, j in enumerate(wrt):
            x = inputs[j].detach()
            base = x.numpy().astype(np.float64).ravel()
            for k in range(base.size):
                values = []
                for step in (eps, -eps):
                    moved = base.copy()
                    moved[k] += step
                    xk = _C.from_numpy(moved.reshape(tuple(x.shape))).to(x.dtype)
                    args = inputs[:j] + (xk,) + inputs[j + 1:]
                    values.append([o.detach().numpy().astype(np.float64).ravel()
                                   for o in _differentiable_outputs(func, args)])
                for out, (plus, minus) in enumerate(zip(*values)):
                    jac[out][col][k] = (plus - minus) / (2 * eps)
    return jac


def _analytical_jacobians(outputs, inputs, wrt):
    """The same layout, one autograd.grad call per output element."""
    from . import grad  # the package's grad (torch.autograd.grad)
    targets = [inputs[j] for j in wrt]
    jac = [[np.zeros((inputs[j].numel(), o.numel())) for j in wrt] for o in outputs]
    for out, o in enumerate(outputs):
        if not o.requires_grad:
            continue  # does not depend on the inputs: its analytical Jacobian is zero
        for m in range(o.numel()):
            seed = np.zeros(o.numel())
            seed[m] = 1.0
            grad_output = _C.from_numpy(seed.reshape(tuple(o.shape))).to(o.dtype)
            grads = grad(o, targets, grad_outputs=grad_output, retain_graph=True, allow_unused=True)
            for col, g in enumerate(grads):
                if g is not None:
                    jac[out][col][:, m] = g.numpy().astype(np.float64).ravel()
    return jac


def _check_inputs(inputs):
    wrt = [j for j, x in enumerate(inputs) if isinstance(x, _Tensor) and x.requires_grad]
    if not wrt:
        raise ValueError("gradcheck expects at least one input tensor to require gradient, but none of the them "
                         "have requires_grad=True.")
    for j in wrt:
        if inputs[j].dtype != _C.float64:
            warnings.warn(f"Input #{j} requires gradient and is not a double precision floating point. This check "
                          "will likely fail if all the inputs are not of double precision floating point.",
                          UserWarning, stacklevel=3)
    return wrt


def gradcheck(func, inputs, *, eps=1e-6, atol=1e-5, rtol=1e-3, raise_exception=True, **kwargs):
    """Checks the gradients of ``func(*inputs)`` w.r.t. the inputs that require grad against
    central finite differences with step ``eps``: every Jacobian entry must satisfy
    ``|analytical - numerical| <= atol + rtol * |numerical|``. Returns True, or on a mismatch raises
    ``GradcheckError`` naming the output and input and printing both Jacobians (returns False with
    ``raise_exception=False``). ``inputs`` is a tensor or a tuple (non-tensor entries are passed
    through). PyTorch's other options (``fast_mode``, ``check_forward_ad``, ...) are accepted only
    at their defaults' meaning and otherwise rejected."""
    _reject_options(kwargs)
    inputs = _as_tuple(inputs)
    wrt = _check_inputs(inputs)
    outputs = _differentiable_outputs(func, inputs)
    numerical = _numerical_jacobians(func, inputs, wrt, eps)
    analytical = _analytical_jacobians(outputs, inputs, wrt)
    for out in range(len(outputs)):
        for col, j in enumerate(wrt):
            a, n = analytical[out][col], numerical[out][col]
            if not np.allclose(a, n, rtol=rtol, atol=atol):
                if not raise_exception:
                    return False
                raise GradcheckError(f"Jacobian mismatch for output {out} with respect to input {j},\n"
                                     f"numerical:{_C.from_numpy(n)}\nanalytical:{_C.from_numpy(a)}\n")
    return True


_DEFAULT_OFF = ("check_batched_grad", "check_batched_forward_grad", "check_forward_ad", "fast_mode")


def _reject_options(kwargs):
    for name, value in kwargs.items():
        if name in _DEFAULT_OFF and not value:
            continue
        if name in ("check_backward_ad", "check_undefined_grad") and value:
            continue
        if name == "nondet_tol" and value == 0.0:
            continue
        if name in ("check_grad_dtypes", "masked") and not value:
            continue
        raise NotImplementedError(f"gradcheck(): the option {name}={value!r} is not supported by Strata")


__all__ = ["GradcheckError", "gradcheck"]
