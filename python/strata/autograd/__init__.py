"""Automatic differentiation: backward/grad over several tensors, grad mode switches
(``strata.no_grad``, ``strata.inference_mode`` and friends), custom functions (``Function``),
numerical gradient checks (``gradcheck``), anomaly detection (``detect_anomaly``,
``set_detect_anomaly``), saved-tensor hooks (``graph``) and tape introspection (``tape``)."""

from .. import _C
from . import function, graph, tape
from .function import Function
from .gradcheck import gradcheck
from .anomaly_mode import detect_anomaly, is_anomaly_check_nan_enabled, is_anomaly_enabled, set_detect_anomaly
from .grad_mode import (enable_grad, inference_mode, is_grad_enabled, is_inference_mode_enabled, no_grad,
                        set_grad_enabled)


def backward(tensors, grad_tensors=None, retain_graph=None, create_graph=False):
    """Accumulates d(tensors)/d(leaf) · grad_tensors into every leaf's ``.grad``
    (torch.autograd.backward). ``grad_tensors`` may be omitted (or hold None) for one-element
    tensors. The graph's saved values are freed unless ``retain_graph``. ``create_graph=True`` (double
    backward) is not supported and raises NotImplementedError."""
    if retain_graph is None:
        retain_graph = create_graph
    _C._backward(tensors, grad_tensors, retain_graph, create_graph)


def grad(outputs, inputs, grad_outputs=None, retain_graph=None, create_graph=False, allow_unused=False):
    """Returns d(outputs)/d(inputs) · grad_outputs as a tuple, one entry per input, without touching
    any ``.grad`` (torch.autograd.grad). An input the outputs do not depend on gives None with
    ``allow_unused=True`` and an error otherwise. ``create_graph=True`` raises NotImplementedError."""
    if retain_graph is None:
        retain_graph = create_graph
    return _C._grad(outputs, inputs, grad_outputs, retain_graph, create_graph, allow_unused)


__all__ = ["Function", "backward", "detect_anomaly", "enable_grad", "function", "grad", "gradcheck", "graph",
           "inference_mode", "is_anomaly_check_nan_enabled", "is_anomaly_enabled", "is_grad_enabled",
           "is_inference_mode_enabled", "no_grad", "set_detect_anomaly", "set_grad_enabled", "tape"]
