"""Grad mode context managers, usable as decorators too (PyTorch's torch.no_grad and friends).
Grad mode is per thread, as in PyTorch."""

import functools

from .. import _C

is_grad_enabled = _C.is_grad_enabled


class _GradModeSwitch:
    """Sets grad mode to `self._mode` for a `with` block or a decorated function's call, then
    restores what it was."""

    _mode = True

    def __enter__(self):
        self._prev = _C.is_grad_enabled()
        _C._set_grad_enabled(self._mode)
        return None

    def __exit__(self, *exc):
        _C._set_grad_enabled(self._prev)
        return False

    def __call__(self, fn):
        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            with self._clone():
                return fn(*args, **kwargs)
        return wrapper

    def _clone(self):
        return self.__class__()


class no_grad(_GradModeSwitch):
    """Ops inside record no graph: ``with strata.no_grad(): ...`` or ``@strata.no_grad()``."""

    _mode = False


class enable_grad(_GradModeSwitch):
    """Turns recording back on inside a no_grad block."""

    _mode = True


class set_grad_enabled(_GradModeSwitch):
    """``set_grad_enabled(False)`` works as a context manager, a decorator, or a plain call that
    sets the mode for the rest of the thread's work (as in PyTorch)."""

    def __init__(self, mode):
        if not isinstance(mode, bool):
            raise TypeError(f"set_grad_enabled(): mode must be a bool, got {type(mode).__name__}")
        self._prev = _C.is_grad_enabled()
        self._mode = mode
        _C._set_grad_enabled(mode)

    def __enter__(self):
        return None

    def __exit__(self, *exc):
        _C._set_grad_enabled(self._prev)
        return False

    def _clone(self):
        return set_grad_enabled(self._mode)


is_inference_mode_enabled = _C.is_inference_mode_enabled


class inference_mode(_GradModeSwitch):
    """``with strata.inference_mode():`` or ``@strata.inference_mode()``: grad mode off and
    ``is_inference_mode_enabled()`` true inside (torch.inference_mode); ``inference_mode(False)``
    changes nothing. The flag is C++ (autograd/grad_mode.h, InferenceMode). Unlike PyTorch's, tensors
    made inside are ordinary tensors that autograd may use later."""

    def __init__(self, mode=True):
        if not isinstance(mode, bool):
            raise TypeError(f"inference_mode(): mode must be a bool, got {type(mode).__name__}")
        self._mode_on = mode

    def __enter__(self):
        self._prev = (_C.is_inference_mode_enabled(), _C.is_grad_enabled())
        if self._mode_on:
            _C._set_inference_mode(True)
            _C._set_grad_enabled(False)
        return None

    def __exit__(self, *exc):
        _C._set_inference_mode(self._prev[0])
        _C._set_grad_enabled(self._prev[1])
        return False

    def _clone(self):
        return inference_mode(self._mode_on)
