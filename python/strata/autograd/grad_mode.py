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
