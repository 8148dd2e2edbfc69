"""Anomaly detection (PyTorch's torch.autograd.detect_anomaly / set_detect_anomaly): when on, the
first recorded op whose output holds NaN or inf, or the first backward step returning a NaN or inf
gradient, raises strata.StrataError naming it ("Function 'MulBackward' returned nan values in its
0th output ..."), and saying when the gradient was a parameter's. The flag and the checks are in
C++ (autograd/anomaly_mode.h, Note [Anomaly detection]); the mode is process-wide, as in PyTorch."""

from .. import _C


def _current():
    """(enabled, check_nan) as they are now; check_nan reads True while the mode is off."""
    on = _C._is_anomaly_enabled()
    return on, (_C._is_anomaly_check_nan_enabled() if on else True)


def is_anomaly_enabled():
    """Whether anomaly detection is on."""
    return _C._is_anomaly_enabled()


def is_anomaly_check_nan_enabled():
    """Whether anomaly detection is on and checks for NaN and inf (``check_nan``)."""
    return _C._is_anomaly_check_nan_enabled()


class set_detect_anomaly:
    """``set_detect_anomaly(True)`` turns anomaly detection on for the rest of the process, or for a
    ``with`` block when used as a context manager (PyTorch's set_detect_anomaly)."""

    def __init__(self, mode, check_nan=True):
        if not isinstance(mode, bool):
            raise TypeError(f"set_detect_anomaly(): mode must be a bool, got {type(mode).__name__}")
        self._prev = _current()
        _C._set_anomaly_enabled(mode, bool(check_nan))

    def __enter__(self):
        return None

    def __exit__(self, *exc):
        _C._set_anomaly_enabled(*self._prev)
        return False


class detect_anomaly:
    """Context manager (and decorator) that turns anomaly detection on for its block:
    ``with strata.autograd.detect_anomaly(): loss.backward()``."""

    def __init__(self, check_nan=True):
        self._check_nan = bool(check_nan)

    def __enter__(self):
        self._prev = _current()
        _C._set_anomaly_enabled(True, self._check_nan)
        return None

    def __exit__(self, *exc):
        _C._set_anomaly_enabled(*self._prev)
        return False

    def __call__(self, fn):
        import functools

        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            with detect_anomaly(self._check_nan):
                return fn(*args, **kwargs)

        return wrapper
