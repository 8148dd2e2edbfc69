"""Optimizers with torch.optim's names, defaults and habits.

``strata.optim.SGD``, ``Adam``, ``AdamW``, ``Adagrad``, ``RMSprop`` and ``RowWiseAdagrad`` (DLRM's per-row
Adagrad) update parameters in place from their ``.grad`` with the C++ optimizers of
``models/optim`` (fused, multithreaded update loops in the operation order of PyTorch's
single-tensor implementations). As in PyTorch:

* ``params`` is an iterable of Tensors or of dicts (parameter groups with their own options);
* ``opt.param_groups`` is a list of dict-like groups; writing an option (``group['lr'] = 0.01``)
  takes effect at the next step, other keys (``initial_lr``) are kept as they are;
* ``opt.state[p]`` holds a parameter's state (``momentum_buffer``, ``exp_avg``, ``step``, ...);
* ``state_dict()`` / ``load_state_dict()`` use PyTorch's nested layout
  ``{'state': {0: {...}}, 'param_groups': [{'lr': ..., 'params': [0, 1]}]}``; loaded values may be
  strata Tensors, NumPy arrays or anything NumPy converts (a torch optimizer's state_dict loads
  directly where the layouts agree).
"""

from __future__ import annotations

import numbers
from collections.abc import Iterable, Mapping, MutableMapping

import numpy as np

from .. import _C
from .._C import Tensor

__all__ = ["Optimizer", "SGD", "Adam", "AdamW", "Adagrad", "RMSprop", "RowWiseAdagrad", "lr_scheduler"]

_FLOAT, _BOOL, _BETAS = "float", "bool", "betas"


# The per-group values the C++ schedulers read (models/optim/lr_scheduler.h); kept as floats even
# when given as ints, as the schedulers compute with them.
_SCHEDULER_KEYS = frozenset({"initial_lr", "max_lr", "min_lr", "max_momentum", "base_momentum"})


def _is_cpp_extra(key, value) -> bool:
    """Whether a param group's non-option entry lives in the C++ group (a float, or a scheduler key)."""
    if not isinstance(key, str) or isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Real):
        return False
    return isinstance(value, (float, np.floating)) or key in _SCHEDULER_KEYS


class _ParamGroup(MutableMapping):
    """One parameter group: a dict-like view whose option writes go to the C++ optimizer.

    Keys other than options hold numbers in the C++ group's extras (where the learning-rate
    schedulers keep ``initial_lr``, ``max_lr``, ...) and anything else in a Python dict."""

    def __init__(self, opt: Optimizer, index: int, params: list, extras: dict):
        self._opt = opt
        self._index = index
        self._params = params
        self._extras = {}
        for key, value in extras.items():
            self[key] = value

    def _cpp_extras(self) -> dict:
        return self._opt._impl.group_extras(self._index)

    def __getitem__(self, key):
        if key == "params":
            return self._params
        kinds = self._opt._OPTIONS
        if key in kinds:
            return self._opt._option_to_py(key, self._opt._impl.group_options(self._index))
        cpp = self._cpp_extras()
        if key in cpp:
            return cpp[key]
        return self._extras[key]

    def __setitem__(self, key, value):
        if key == "params":
            raise ValueError(
                f"{type(self._opt).__name__}: a param group's params cannot be replaced; "
                "use add_param_group() to add parameters"
            )
        if key in self._opt._OPTIONS:
            for cpp_key, cpp_value in self._opt._option_to_cpp(key, value).items():
                self._opt._impl.set_option(self._index, cpp_key, cpp_value)
        elif _is_cpp_extra(key, value):
            self._extras.pop(key, None)
            self._opt._impl.set_extra(self._index, key, float(value))
        else:
            if isinstance(key, str):
                self._opt._impl.del_extra(self._index, key)
            self._extras[key] = value

    def __delitem__(self, key):
        if key == "params" or key in self._opt._OPTIONS:
            raise KeyError(f"{type(self._opt).__name__}: option '{key}' of a param group cannot be deleted")
        if isinstance(key, str) and self._opt._impl.del_extra(self._index, key):
            return
        del self._extras[key]

    def __iter__(self):
        yield "params"
        yield from self._opt._OPTIONS
        yield from self._cpp_extras()
        yield from self._extras

    def __len__(self):
        return 1 + len(self._opt._OPTIONS) + len(self._cpp_extras()) + len(self._extras)

    def _extra_items(self) -> dict:
        """The keys other than params and options, with their values."""
        out = dict(self._cpp_extras())
        out.update(self._extras)
        return out

    def __repr__(self):
        return repr(dict(self.items()))


class _State(Mapping):
    """``opt.state``: parameter -> dict of its state tensors (empty until the state exists)."""

    def __init__(self, opt: Optimizer):
        self._opt = opt

    def _index_of(self, param) -> int:
        i = 0
        for group in self._opt.param_groups:
            for p in group["params"]:
                if p is param:
                    return i
                i += 1
        if isinstance(param, Tensor):
            return self._opt._impl.find_param(param)
        return -1

    def __getitem__(self, param):
        i = self._index_of(param)
        if i < 0:
            raise KeyError("not a parameter of this optimizer")
        return self._opt._impl.param_state(i)

    def __iter__(self):
        i = 0
        for group in self._opt.param_groups:
            for p in group["params"]:
                if len(self._opt._impl.param_state(i)) > 0:
                    yield p
                i += 1

    def __len__(self):
        return sum(1 for _ in self)

    def __repr__(self):
        states = (self._opt._impl.param_state(i) for i in range(self._opt._impl.num_params))
        return repr({i: s for i, s in enumerate(states) if s})


def _real(name: str, key: str, value) -> float:
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise TypeError(f"{name}: option '{key}' must be a number, got {type(value).__name__}")
    return float(value)


def _param_list(name: str, params) -> list:
    if isinstance(params, Tensor):
        return [params]
    if isinstance(params, (set, frozenset)):
        raise TypeError(
            "optimizer parameters need to be organized in ordered collections, but "
            "the ordering of tensors in sets will change between runs. Please use a list instead."
        )
    if not isinstance(params, Iterable):
        raise TypeError(f"{name}: params must be a Tensor or an iterable of Tensors, got {type(params).__name__}")
    out = list(params)
    for p in out:
        if not isinstance(p, Tensor):
            raise TypeError(f"optimizer can only optimize Tensors, but one of the params is {type(p).__name__}")
    return out


def _as_tensor(value, where: str):
    if isinstance(value, Tensor):
        return value
    try:
        arr = np.asarray(value)
    except Exception as e:  # noqa: BLE001 - reported as a TypeError naming the entry
        raise TypeError(f"{where}: expected a Tensor or an array, got {type(value).__name__}") from e
    if arr.dtype.kind not in "fiub":
        raise TypeError(f"{where}: expected a Tensor or an array, got {type(value).__name__}")
    return _C.tensor(arr)


class Optimizer:
    """Base class: PyTorch's Optimizer interface over a C++ optimizer (``_C._Optimizer``)."""

    _KIND = ""
    #: Python option names -> kind (float, bool, or betas = (beta1, beta2)), in PyTorch's order.
    _OPTIONS: dict = {}

    def __init__(self, params, defaults: dict):
        name = type(self).__name__
        if isinstance(params, Tensor):
            raise TypeError(
                "params argument given to the optimizer should be an iterable of Tensors or dicts, "
                f"but got {type(params).__name__}"
            )
        if isinstance(params, (set, frozenset)):
            _param_list(name, params)  # raises
        groups = list(params)
        if len(groups) == 0:
            raise ValueError("optimizer got an empty parameter list")
        if not isinstance(groups[0], Mapping):
            groups = [{"params": groups}]
        self.defaults = dict(defaults)
        cpp_defaults = {}
        for key, value in self.defaults.items():
            cpp_defaults.update(self._option_to_cpp(key, value))
        cpp_groups, py_groups = [], []
        for g in groups:
            params_, options, extras = self._split_group(g)
            cpp_groups.append((params_, options))
            py_groups.append((params_, extras))
        self._impl = _C._Optimizer(self._KIND, cpp_groups, cpp_defaults)
        self.param_groups = [_ParamGroup(self, i, p, e) for i, (p, e) in enumerate(py_groups)]
        self.state = _State(self)

    # ---- option conversion ----------------------------------------------------------------
    def _option_to_cpp(self, key: str, value) -> dict:
        name = type(self).__name__
        kind = self._OPTIONS.get(key)
        if kind == _BETAS:
            if isinstance(value, (str, bytes)) or not isinstance(value, Iterable):
                raise TypeError(f"{name}: betas must be a pair of numbers, got {type(value).__name__}")
            betas = list(value)
            if len(betas) != 2:
                raise ValueError(f"{name}: betas must be a pair of numbers, got {len(betas)} values")
            return {"beta1": _real(name, "betas", betas[0]), "beta2": _real(name, "betas", betas[1])}
        if kind == _BOOL:
            if not isinstance(value, (bool, numbers.Integral, np.bool_)):
                raise TypeError(f"{name}: option '{key}' must be a bool, got {type(value).__name__}")
            return {key: bool(value)}
        if kind == _FLOAT:
            return {key: _real(name, key, value)}
        raise ValueError(f"{name}: unknown option '{key}' (expected one of: {', '.join(self._OPTIONS)})")

    def _option_to_py(self, key: str, cpp: dict):
        kind = self._OPTIONS[key]
        if kind == _BETAS:
            return (cpp["beta1"], cpp["beta2"])
        if kind == _BOOL:
            return bool(cpp[key])
        return cpp[key]

    def _split_group(self, group) -> tuple:
        if not isinstance(group, Mapping):
            raise TypeError(f"param groups must be dicts, got {type(group).__name__}")
        if "params" not in group:
            raise ValueError("param group must have a 'params' key")
        params = _param_list(type(self).__name__, group["params"])
        options, extras = {}, {}
        for key, value in group.items():
            if key == "params":
                continue
            if key in self._OPTIONS:
                options.update(self._option_to_cpp(key, value))
            else:
                extras[key] = value
        return params, options, extras

    # ---- torch.optim.Optimizer interface -----------------------------------------------------
    def step(self, closure=None):
        """Performs one optimization step; `closure` re-evaluates the model and returns the loss."""
        loss = None
        if closure is not None:
            from ..autograd import enable_grad

            with enable_grad():
                loss = closure()
        self._impl.step()
        return loss

    def zero_grad(self, set_to_none: bool = True) -> None:
        """Resets the gradients of all parameters: to None (default) or to zeros."""
        self._impl.zero_grad(bool(set_to_none))

    def add_param_group(self, param_group: dict) -> None:
        """Adds a parameter group; options it lacks come from the optimizer's defaults."""
        params, options, extras = self._split_group(param_group)
        self._impl.add_param_group(params, options)
        self.param_groups.append(_ParamGroup(self, len(self.param_groups), params, extras))

    def state_dict(self) -> dict:
        """The state in PyTorch's layout: {'state': {i: {...}}, 'param_groups': [{..., 'params': [...]}]}."""
        state: dict = {}
        for key, value in self._impl.state_dict():
            parts = key.split(".", 2)
            if parts[0] == "state":
                state.setdefault(int(parts[1]), {})[parts[2]] = value
        groups = []
        first = 0
        for i, group in enumerate(self.param_groups):
            cpp = self._impl.group_options(i)
            packed = {key: self._option_to_py(key, cpp) for key in self._OPTIONS}
            packed.update(group._extra_items())
            n = len(group["params"])
            packed["params"] = list(range(first, first + n))
            first += n
            groups.append(packed)
        return {"state": state, "param_groups": groups}

    def load_state_dict(self, state_dict: dict) -> None:
        """Loads a state from state_dict() (or a torch optimizer's, values as Tensors or arrays)."""
        flat, new_extras = self._flat_state(state_dict)
        self._impl.load_state_dict(flat)
        for group, extras in zip(self.param_groups, new_extras):
            for key in list(group._extra_items()):
                del group[key]
            for key, value in extras.items():
                group[key] = value

    def _check_state_dict(self, state_dict: dict) -> None:
        """Raises what load_state_dict(state_dict) would raise, changing nothing."""
        flat, _ = self._flat_state(state_dict)
        self._impl.check_state_dict(flat)

    def _flat_state(self, state_dict: dict):
        """The C++ optimizer's flat entries for ``state_dict``, and each group's extra keys."""
        name = type(self).__name__
        if not isinstance(state_dict, Mapping):
            raise TypeError(f"{name}.load_state_dict: expected a dict, got {type(state_dict).__name__}")
        for key in ("state", "param_groups"):
            if key not in state_dict:
                raise ValueError(f"{name}.load_state_dict: the state dict lacks the key '{key}'")
        state, groups = state_dict["state"], state_dict["param_groups"]
        if not isinstance(state, Mapping):
            raise TypeError(f"{name}.load_state_dict: 'state' must be a dict, got {type(state).__name__}")
        if isinstance(groups, (str, bytes, Mapping)) or not isinstance(groups, Iterable):
            raise TypeError(f"{name}.load_state_dict: 'param_groups' must be a list, got {type(groups).__name__}")
        groups = list(groups)
        if len(groups) != len(self.param_groups):
            raise ValueError(
                "loaded state dict has a different number of parameter groups "
                f"({len(groups)}, the optimizer has {len(self.param_groups)})"
            )
        flat = []
        for index, entries in state.items():
            if isinstance(index, bool) or not isinstance(index, numbers.Integral):
                raise TypeError(f"{name}.load_state_dict: state keys must be parameter indices, got {index!r}")
            if not isinstance(entries, Mapping):
                raise TypeError(f"{name}.load_state_dict: state[{index}] must be a dict, got {type(entries).__name__}")
            for sname, value in entries.items():
                where = f"{name}.load_state_dict: state[{index}]['{sname}']"
                flat.append((f"state.{int(index)}.{sname}", _as_tensor(value, where)))
        new_extras = []
        for g, group in enumerate(groups):
            if not isinstance(group, Mapping):
                raise TypeError(f"{name}.load_state_dict: param_groups[{g}] must be a dict, got {type(group).__name__}")
            if "params" not in group:
                raise ValueError(f"{name}.load_state_dict: param_groups[{g}] lacks the key 'params'")
            ids = list(group["params"])
            for i in ids:
                if isinstance(i, bool) or not isinstance(i, numbers.Integral):
                    raise TypeError(f"{name}.load_state_dict: param_groups[{g}]['params'] must hold ints, got {i!r}")
            flat.append((f"param_groups.{g}.params", _C.tensor(np.asarray(ids, dtype=np.int64).reshape(-1))))
            extras = {}
            for key, value in group.items():
                if key == "params":
                    continue
                if key in self._OPTIONS:
                    for cpp_key, cpp_value in self._option_to_cpp(key, value).items():
                        flat.append((f"param_groups.{g}.{cpp_key}", _C.tensor(float(cpp_value), dtype=_C.float64)))
                else:
                    extras[key] = value
            new_extras.append(extras)
        return flat, new_extras

    def __repr__(self) -> str:
        out = type(self).__name__ + " ("
        for i, group in enumerate(self.param_groups):
            out += "\n" + f"Parameter Group {i}\n"
            for key in sorted(group.keys()):
                if key != "params":
                    out += f"    {key}: {group[key]}\n"
        return out + ")"

    def __getstate__(self):
        raise TypeError(f"{type(self).__name__} cannot be pickled; save its state_dict() instead")


class SGD(Optimizer):
    """Stochastic gradient descent with momentum, Nesterov momentum and weight decay (torch.optim.SGD)."""

    _KIND = "SGD"
    _OPTIONS = {"lr": _FLOAT, "momentum": _FLOAT, "dampening": _FLOAT, "weight_decay": _FLOAT,
                "nesterov": _BOOL, "maximize": _BOOL}

    def __init__(self, params, lr=1e-3, momentum=0, dampening=0, weight_decay=0, nesterov=False, *,
                 maximize=False):
        super().__init__(params, dict(lr=lr, momentum=momentum, dampening=dampening, weight_decay=weight_decay,
                                      nesterov=nesterov, maximize=maximize))


class Adam(Optimizer):
    """Adam with optional AMSGrad (torch.optim.Adam)."""

    _KIND = "Adam"
    _OPTIONS = {"lr": _FLOAT, "betas": _BETAS, "eps": _FLOAT, "weight_decay": _FLOAT, "amsgrad": _BOOL,
                "maximize": _BOOL}

    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0, amsgrad=False, *,
                 maximize=False):
        super().__init__(params, dict(lr=lr, betas=betas, eps=eps, weight_decay=weight_decay, amsgrad=amsgrad,
                                      maximize=maximize))


class AdamW(Adam):
    """Adam with decoupled weight decay (torch.optim.AdamW)."""

    _KIND = "AdamW"

    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=1e-2, amsgrad=False, *,
                 maximize=False):
        super().__init__(params, lr=lr, betas=betas, eps=eps, weight_decay=weight_decay, amsgrad=amsgrad,
                         maximize=maximize)


class Adagrad(Optimizer):
    """Adagrad with learning-rate decay (torch.optim.Adagrad)."""

    _KIND = "Adagrad"
    _OPTIONS = {"lr": _FLOAT, "lr_decay": _FLOAT, "weight_decay": _FLOAT, "initial_accumulator_value": _FLOAT,
                "eps": _FLOAT, "maximize": _BOOL}

    def __init__(self, params, lr=1e-2, lr_decay=0, weight_decay=0, initial_accumulator_value=0, eps=1e-10, *,
                 maximize=False):
        super().__init__(params, dict(lr=lr, lr_decay=lr_decay, weight_decay=weight_decay,
                                      initial_accumulator_value=initial_accumulator_value, eps=eps,
                                      maximize=maximize))


class RMSprop(Optimizer):
    """RMSprop with momentum and the centered variant (torch.optim.RMSprop)."""

    _KIND = "RMSprop"
    _OPTIONS = {"lr": _FLOAT, "alpha": _FLOAT, "eps": _FLOAT, "weight_decay": _FLOAT, "momentum": _FLOAT,
                "centered": _BOOL, "maximize": _BOOL}

    def __init__(self, params, lr=1e-2, alpha=0.99, eps=1e-8, weight_decay=0, momentum=0, centered=False, *,
                 maximize=False):
        super().__init__(params, dict(lr=lr, alpha=alpha, eps=eps, weight_decay=weight_decay, momentum=momentum,
                                      centered=centered, maximize=maximize))


class RowWiseAdagrad(Optimizer):
    """Row-wise Adagrad (DLRM's; fbgemm's rowwise_adagrad): one accumulator per row of a 2-D
    parameter (sum_r += mean(g_r**2); p_r -= lr * g_r / (sqrt(sum_r) + eps)), one for the whole
    tensor of a 1-D parameter. PyTorch has no equivalent."""

    _KIND = "RowWiseAdagrad"
    _OPTIONS = {"lr": _FLOAT, "eps": _FLOAT, "weight_decay": _FLOAT}

    def __init__(self, params, lr=1e-2, eps=1e-10, weight_decay=0):
        super().__init__(params, dict(lr=lr, eps=eps, weight_decay=weight_decay))


from . import lr_scheduler  # noqa: E402  (it needs Optimizer)
