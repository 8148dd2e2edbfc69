"""Learning-rate schedulers with torch.optim.lr_scheduler's names, formulas and habits.

The schedules are computed by the C++ schedulers of ``models/optim/lr_scheduler.h`` (Note
[Schedulers write the param groups]), which write each group's ``lr`` in the C++ optimizer; this
module adds PyTorch's Python surface: constructor signatures, ``step()`` / ``get_last_lr()`` /
``last_epoch`` / ``base_lrs``, and ``state_dict()`` / ``load_state_dict()`` in PyTorch's layout
(a dict of plain Python values; a torch scheduler's state_dict loads where the keys agree).
"""

from __future__ import annotations

import numbers
import types
import warnings
from collections import Counter

from .. import _C
from . import Optimizer

__all__ = [
    "LRScheduler",
    "LambdaLR",
    "StepLR",
    "MultiStepLR",
    "ExponentialLR",
    "CosineAnnealingLR",
    "LinearLR",
    "OneCycleLR",
    "SequentialLR",
    "ReduceLROnPlateau",
]

# Keys of PyTorch's state dicts that describe its Python implementation, not the schedule; they
# are written for compatibility and ignored when loading.
_PYTORCH_ONLY_KEYS = frozenset({"_is_initial", "_get_lr_called_within_step", "_schedule_phases", "_anneal_func_type",
                                "use_beta1", "default_min_lr", "verbose"})
# Keys whose values are ints (or bools) in PyTorch's state dicts.
_INT_KEYS = frozenset({"last_epoch", "_step_count", "step_size", "T_max", "total_iters", "total_steps", "patience",
                       "cooldown", "cooldown_counter", "num_bad_epochs"})
_BOOL_KEYS = frozenset({"cycle_momentum"})


def _check_optimizer(optimizer):
    if not isinstance(optimizer, Optimizer):
        raise TypeError(f"{type(optimizer).__name__} is not an Optimizer")


def _to_python(key, tensor):
    """A C++ state entry (0-d or 1-D f64 tensor) as PyTorch's Python value."""
    if tensor.dim() == 1:
        values = tensor.tolist()
        if key in ("milestones", "_milestones"):
            values = [int(v) for v in values]
            return Counter(values) if key == "milestones" else values
        return values
    value = tensor.item()
    if key in _BOOL_KEYS:
        return bool(value)
    if key in _INT_KEYS:
        return int(value)
    return value


def _to_cpp(owner, key, value):
    """A PyTorch state value as the C++ entry (a 0-d or 1-D f64 tensor)."""
    if isinstance(value, Counter):
        value = sorted(value.elements())
    if isinstance(value, (list, tuple)):
        for v in value:
            if isinstance(v, bool) or not isinstance(v, numbers.Real):
                raise TypeError(f"{owner}.load_state_dict: '{key}' must hold numbers, got {type(v).__name__}")
        return _C.tensor([float(v) for v in value], dtype=_C.float64).reshape(-1)
    if isinstance(value, bool) and key not in _BOOL_KEYS:
        raise TypeError(f"{owner}.load_state_dict: '{key}' must be a number, got bool")
    if not isinstance(value, numbers.Real):
        raise TypeError(f"{owner}.load_state_dict: '{key}' must be a number, got {type(value).__name__}")
    return _C.tensor(float(value), dtype=_C.float64)


def _cpp_state(owner, state_dict, skip=()):
    if not isinstance(state_dict, dict):
        raise TypeError(f"{owner}.load_state_dict: expected a dict, got {type(state_dict).__name__}")
    return [(k, _to_cpp(owner, k, v)) for k, v in state_dict.items()
            if k not in _PYTORCH_ONLY_KEYS and k not in skip]


class LRScheduler:
    """Base of the schedulers (torch.optim.lr_scheduler.LRScheduler); the subclasses below choose
    the schedule. Constructing one takes its first step (``last_epoch`` becomes 0)."""

    _KIND = None

    def __init__(self, optimizer, last_epoch=-1, **args):
        if type(self)._KIND is None:
            raise TypeError("LRScheduler is abstract: use one of the schedulers of strata.optim.lr_scheduler")
        _check_optimizer(optimizer)
        if isinstance(last_epoch, bool) or not isinstance(last_epoch, numbers.Integral):
            raise TypeError(f"{type(self).__name__}: last_epoch must be an int, got {type(last_epoch).__name__}")
        self.optimizer = optimizer
        try:
            self._impl = _C._LRScheduler(self._KIND, optimizer._impl, args, int(last_epoch))
        except _C.StrataValueError as e:
            if "initial_lr" in str(e) and "resuming" in str(e):
                raise KeyError(str(e)) from None
            raise

    @property
    def last_epoch(self) -> int:
        return self._impl.last_epoch

    @property
    def base_lrs(self) -> list:
        return list(self._impl.base_lrs)

    @property
    def _step_count(self) -> int:
        return self._impl.step_count

    def get_last_lr(self) -> list:
        """The learning rate of each param group after the last step."""
        return list(self._impl.last_lr)

    def step(self, epoch=None) -> None:
        """Advances the schedule by one epoch (or, deprecated as in PyTorch, jumps to ``epoch``)."""
        if epoch is None:
            self._impl.step()
            return
        warnings.warn("The epoch parameter in `scheduler.step()` was not necessary and is being deprecated where "
                      "possible. Please use `scheduler.step()` to step the scheduler.", UserWarning, stacklevel=2)
        if isinstance(epoch, bool) or not isinstance(epoch, numbers.Integral):
            raise TypeError(f"{type(self).__name__}.step: epoch must be an int, got {type(epoch).__name__}")
        self._impl.step_to(int(epoch))

    def state_dict(self) -> dict:
        """The scheduler's state in PyTorch's layout (plain Python values)."""
        out = {k: _to_python(k, v) for k, v in self._impl.state_dict()}
        out.setdefault("_is_initial", False)
        out.setdefault("_get_lr_called_within_step", False)
        return out

    def load_state_dict(self, state_dict) -> None:
        """Loads a state from state_dict() (or from the same torch scheduler's)."""
        self._impl.load_state_dict(_cpp_state(type(self).__name__, state_dict))

    def __repr__(self) -> str:
        return f"<strata.optim.lr_scheduler.{type(self).__name__} at last_epoch={self.last_epoch}>"

    def __getstate__(self):
        raise TypeError(f"{type(self).__name__} cannot be pickled; save its state_dict() instead")


class LambdaLR(LRScheduler):
    """lr = initial_lr * lr_lambda(epoch): one function, or a list with one per param group."""

    _KIND = "LambdaLR"

    def __init__(self, optimizer, lr_lambda, last_epoch=-1):
        _check_optimizer(optimizer)
        n = len(optimizer.param_groups)
        if isinstance(lr_lambda, (list, tuple)):
            if len(lr_lambda) != n:
                raise ValueError(f"Expected {n} lr_lambdas, but got {len(lr_lambda)}")
            self.lr_lambdas = list(lr_lambda)
        else:
            self.lr_lambdas = [lr_lambda] * n
        for fn in self.lr_lambdas:
            if not callable(fn):
                raise TypeError(f"lr_lambda should be a function, but got {type(fn).__name__}")
        super().__init__(optimizer, last_epoch, lr_lambdas=self.lr_lambdas)

    def state_dict(self) -> dict:
        out = super().state_dict()
        # As PyTorch: functions are not saved, callable objects' attributes are.
        out["lr_lambdas"] = [None if isinstance(fn, types.FunctionType) else fn.__dict__.copy()
                             for fn in self.lr_lambdas]
        return out

    def load_state_dict(self, state_dict) -> None:
        lambdas = state_dict.get("lr_lambdas", [None] * len(self.lr_lambdas)) if isinstance(state_dict, dict) else None
        self._impl.load_state_dict(_cpp_state(type(self).__name__, state_dict, skip=("lr_lambdas",)))
        for fn, saved in zip(self.lr_lambdas, lambdas):
            if saved is not None:
                fn.__dict__.update(saved)


class StepLR(LRScheduler):
    """lr *= gamma every step_size epochs."""

    _KIND = "StepLR"

    def __init__(self, optimizer, step_size, gamma=0.1, last_epoch=-1):
        super().__init__(optimizer, last_epoch, step_size=step_size, gamma=gamma)


class MultiStepLR(LRScheduler):
    """lr *= gamma at each milestone epoch."""

    _KIND = "MultiStepLR"

    def __init__(self, optimizer, milestones, gamma=0.1, last_epoch=-1):
        super().__init__(optimizer, last_epoch, milestones=list(milestones), gamma=gamma)


class ExponentialLR(LRScheduler):
    """lr *= gamma every epoch."""

    _KIND = "ExponentialLR"

    def __init__(self, optimizer, gamma, last_epoch=-1):
        super().__init__(optimizer, last_epoch, gamma=gamma)


class CosineAnnealingLR(LRScheduler):
    """Cosine annealing from the initial lr to eta_min over T_max epochs."""

    _KIND = "CosineAnnealingLR"

    def __init__(self, optimizer, T_max, eta_min=0.0, last_epoch=-1):  # noqa: N803 - PyTorch's name
        super().__init__(optimizer, last_epoch, T_max=T_max, eta_min=eta_min)


class LinearLR(LRScheduler):
    """The lr factor goes linearly from start_factor to end_factor over total_iters epochs."""

    _KIND = "LinearLR"

    def __init__(self, optimizer, start_factor=1.0 / 3, end_factor=1.0, total_iters=5, last_epoch=-1):
        super().__init__(optimizer, last_epoch, start_factor=start_factor, end_factor=end_factor,
                         total_iters=total_iters)


class OneCycleLR(LRScheduler):
    """The 1cycle policy (lr up to max_lr, then down; momentum the other way), stepped per batch."""

    _KIND = "OneCycleLR"

    def __init__(self, optimizer, max_lr, total_steps=None, epochs=None, steps_per_epoch=None, pct_start=0.3,
                 anneal_strategy="cos", cycle_momentum=True, base_momentum=0.85, max_momentum=0.95, div_factor=25.0,
                 final_div_factor=1e4, three_phase=False, last_epoch=-1):
        if not isinstance(pct_start, float) or not 0 <= pct_start <= 1:
            raise ValueError(f"Expected float between 0 and 1 pct_start, but got {pct_start}")
        for name, value in (("total_steps", total_steps), ("epochs", epochs), ("steps_per_epoch", steps_per_epoch)):
            if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value <= 0):
                raise ValueError(f"Expected positive integer {name}, but got {value}")
        if anneal_strategy not in ("cos", "linear"):
            raise ValueError(f"anneal_strategy must be one of 'cos' or 'linear', instead got {anneal_strategy}")
        super().__init__(optimizer, last_epoch, max_lr=max_lr, total_steps=total_steps, epochs=epochs,
                         steps_per_epoch=steps_per_epoch, pct_start=pct_start, anneal_strategy=anneal_strategy,
                         cycle_momentum=bool(cycle_momentum), base_momentum=base_momentum, max_momentum=max_momentum,
                         div_factor=div_factor, final_div_factor=final_div_factor, three_phase=bool(three_phase))

    @property
    def total_steps(self) -> int:
        return int(dict(self._impl.state_dict())["total_steps"].item())


class SequentialLR(LRScheduler):
    """Runs ``schedulers`` one after another, switching at each of ``milestones`` (e.g. a LinearLR
    warm-up, then CosineAnnealingLR)."""

    _KIND = "SequentialLR"

    def __init__(self, optimizer, schedulers, milestones, last_epoch=-1):
        _check_optimizer(optimizer)
        schedulers = list(schedulers)
        if len(schedulers) < 1:
            raise ValueError("SequentialLR expects at least one scheduler, but got no scheduler.")
        for i, s in enumerate(schedulers):
            if not hasattr(s, "optimizer"):
                raise TypeError(f"SequentialLR at index {i} should have `optimizer` as its attribute.")
            if isinstance(s, ReduceLROnPlateau):
                raise ValueError(
                    "SequentialLR does not support `ReduceLROnPlateau` scheduler as it requires additional kwargs "
                    f"to be specified when calling `step`, but got one at index {i} in the given schedulers sequence.")
            if s.optimizer is not optimizer:
                raise ValueError(
                    f"SequentialLR expects all schedulers to belong to the same optimizer, but got scheduler "
                    f"{type(s).__name__} at index {i} has {s.optimizer}, which is different from "
                    f"{type(optimizer).__name__}.")
        milestones = list(milestones)
        if len(milestones) != len(schedulers) - 1:
            raise ValueError(
                "Sequential Schedulers expects number of schedulers provided to be one more than the number of "
                f"milestone points, but got number of schedulers {len(schedulers)} and the number of milestones to "
                f"be equal to {len(milestones)}")
        self._schedulers = schedulers
        super().__init__(optimizer, last_epoch, schedulers=[s._impl for s in schedulers], milestones=milestones)

    def step(self) -> None:  # noqa: D102 - PyTorch's SequentialLR.step takes no epoch
        self._impl.step()

    def state_dict(self) -> dict:
        own = {k: _to_python(k, v) for k, v in self._impl.state_dict() if not k.startswith("_schedulers.")}
        own["_schedulers"] = [s.state_dict() for s in self._schedulers]
        return own

    def load_state_dict(self, state_dict) -> None:
        if not isinstance(state_dict, dict):
            raise TypeError(f"SequentialLR.load_state_dict: expected a dict, got {type(state_dict).__name__}")
        children = state_dict.get("_schedulers", [None] * len(self._schedulers))
        if len(children) != len(self._schedulers):
            raise ValueError(f"SequentialLR.load_state_dict: {len(children)} scheduler states for "
                             f"{len(self._schedulers)} schedulers")
        self._impl.load_state_dict(_cpp_state("SequentialLR", state_dict, skip=("_schedulers",)))
        for s, child in zip(self._schedulers, children):
            if child is not None:
                s.load_state_dict(child)


class ReduceLROnPlateau:
    """Reduces every group's lr by ``factor`` when the metric given to ``step(metric)`` stops
    improving for more than ``patience`` steps (torch.optim.lr_scheduler.ReduceLROnPlateau)."""

    def __init__(self, optimizer, mode="min", factor=0.1, patience=10, threshold=1e-4, threshold_mode="rel",
                 cooldown=0, min_lr=0, eps=1e-8):
        if factor >= 1.0:
            raise ValueError("Factor should be < 1.0.")
        _check_optimizer(optimizer)
        if isinstance(min_lr, (list, tuple)) and len(min_lr) != len(optimizer.param_groups):
            raise ValueError(f"expected {len(optimizer.param_groups)} min_lrs, got {len(min_lr)}")
        if mode not in ("min", "max"):
            raise ValueError("mode " + str(mode) + " is unknown!")
        if threshold_mode not in ("rel", "abs"):
            raise ValueError("threshold mode " + str(threshold_mode) + " is unknown!")
        self.optimizer = optimizer
        self._impl = _C._ReduceLROnPlateau(optimizer._impl, dict(
            mode=mode, factor=factor, patience=patience, threshold=threshold, threshold_mode=threshold_mode,
            cooldown=cooldown, min_lr=list(min_lr) if isinstance(min_lr, (list, tuple)) else min_lr, eps=eps))

    def step(self, metrics, epoch=None) -> None:
        """Records ``metrics`` (a number or a one-element tensor) for one epoch."""
        if epoch is not None:
            raise ValueError("ReduceLROnPlateau.step: the deprecated epoch argument is not supported")
        self._impl.step(float(metrics))

    def get_last_lr(self) -> list:
        return list(self._impl.last_lr)

    def __getattr__(self, name):
        if name.startswith("__") or name == "_impl":
            raise AttributeError(name)
        if name in ("last_epoch", "best", "num_bad_epochs", "cooldown_counter"):
            return getattr(self._impl, name)
        state = self.state_dict() if name in ("factor", "patience", "cooldown", "threshold", "mode", "threshold_mode",
                                              "eps", "min_lrs", "mode_worse") else None
        if state is None:
            raise AttributeError(f"'ReduceLROnPlateau' object has no attribute '{name}'")
        return state[name]

    @property
    def in_cooldown(self) -> bool:
        return self._impl.cooldown_counter > 0

    def state_dict(self) -> dict:
        out = {k: _to_python(k, v) for k, v in self._impl.state_dict()}
        out["mode"] = "min" if out["mode"] == 0 else "max"
        out["threshold_mode"] = "rel" if out["threshold_mode"] == 0 else "abs"
        return out

    def load_state_dict(self, state_dict) -> None:
        if not isinstance(state_dict, dict):
            raise TypeError(f"ReduceLROnPlateau.load_state_dict: expected a dict, got {type(state_dict).__name__}")
        state = dict(state_dict)
        for key, names in (("mode", ("min", "max")), ("threshold_mode", ("rel", "abs"))):
            if key in state:
                if state[key] not in names:
                    raise ValueError(f"ReduceLROnPlateau.load_state_dict: {key} {state[key]!r} is unknown")
                state[key] = names.index(state[key])
        self._impl.load_state_dict(_cpp_state("ReduceLROnPlateau", state))

    def __getstate__(self):
        raise TypeError("ReduceLROnPlateau cannot be pickled; save its state_dict() instead")
