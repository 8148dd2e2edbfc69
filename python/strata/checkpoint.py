"""Checkpoints from Python: a model's state_dict, an optimizer's state and metadata in one file.

The file is Strata's checkpoint format (models/checkpoint.h), written atomically: a temporary file in
the same directory is renamed over ``path``, so an error or a crash mid-save leaves any previous
file intact.

- The model section holds ``model.state_dict()`` under its keys.
- The optimizer section holds every tensor of ``optimizer.state_dict()`` (any nesting of dicts,
  lists and tuples, like torch.optim's ``{'state': {0: {...}}, 'param_groups': [...]}``) under its
  dotted path (``state.0.momentum_buffer``), plus the entry ``__structure__`` (a uint8 tensor of
  JSON) that records the nesting and the non-tensor values, so load_checkpoint gives the optimizer
  the same structure back. A checkpoint written by C++ (no ``__structure__``) hands the optimizer
  its flat entries as an OrderedDict.
- Each metadata value is stored as JSON text (numbers, strings, booleans, None, lists and dicts
  round-trip); a value that is not valid JSON (written by C++, e.g. ``"abc"``) comes back as the
  raw string.
"""

from __future__ import annotations

import json
import os
from collections import OrderedDict
from collections.abc import Mapping

import numpy as np

from . import _C
from ._C import Tensor

__all__ = ["save_checkpoint", "load_checkpoint"]

_STRUCTURE_KEY = "__structure__"


def _path_arg(path, op):
    try:
        return os.fspath(path)
    except TypeError:
        raise TypeError(f"{op}: path must be a str or os.PathLike, got {type(path).__name__}") from None


def _check_model(model, op):
    from .nn import Module

    if not isinstance(model, Module):
        raise TypeError(f"{op}: model must be a strata.nn.Module, got {type(model).__name__}")


def _check_optimizer(optimizer, op, method):
    if not callable(getattr(optimizer, method, None)):
        raise TypeError(f"{op}: optimizer must have a {method}() method, got {type(optimizer).__name__}")


# ---- optimizer state: nested Python structure <-> flat tensors + JSON skeleton -------------------

def _pack(obj, path, tensors, keys, where="save_checkpoint: the optimizer state_dict"):
    if isinstance(obj, (Tensor, np.ndarray)):
        t = obj if isinstance(obj, Tensor) else _C.from_numpy(np.ascontiguousarray(obj))
        key, n = path or "_", 1
        while key in keys or key == _STRUCTURE_KEY:
            key, n = f"{path}#{n}", n + 1
        keys.add(key)
        tensors.append((key, t.detach()))
        node = {"tensor": key}
        if isinstance(obj, Tensor) and obj.requires_grad:
            node["requires_grad"] = True
        if type(obj).__name__ == "Parameter":
            node["parameter"] = True
        return node
    if isinstance(obj, np.generic):
        obj = obj.item()
    if obj is None or isinstance(obj, (bool, int, float, str)):
        return {"value": obj}
    if isinstance(obj, Mapping):
        items = []
        for k, v in obj.items():
            if isinstance(k, np.generic):
                k = k.item()
            if not (k is None or isinstance(k, (bool, int, float, str))):
                raise TypeError(f"{where} has a key of type {type(k).__name__} at "
                                f"'{path}'; keys must be str, int, float, bool or None")
            items.append([k, _pack(v, f"{path}.{k}" if path else str(k), tensors, keys, where)])
        return {"odict" if isinstance(obj, OrderedDict) else "dict": items}
    if isinstance(obj, (list, tuple)):
        kind = "list" if isinstance(obj, list) else "tuple"
        return {kind: [_pack(v, f"{path}.{i}" if path else str(i), tensors, keys, where) for i, v in enumerate(obj)]}
    raise TypeError(f"{where} holds a {type(obj).__name__} at '{path}'; only "
                    "tensors, NumPy arrays, numbers, strings, None, lists, tuples and dicts can be saved")


def _unpack(node, tensors, path):
    if not isinstance(node, dict) or not node:
        raise ValueError(f"load_checkpoint: the optimizer structure of {path} is corrupt")
    kind, value = next(iter(node.items()))
    if kind == "tensor":
        if value not in tensors:
            raise ValueError(f"load_checkpoint: the optimizer structure of {path} names a missing tensor '{value}'")
        t = tensors[value]
        if node.get("parameter"):
            from .nn import Parameter

            return Parameter(t, requires_grad=bool(node.get("requires_grad")))
        return t.requires_grad_() if node.get("requires_grad") else t
    if len(node) != 1:
        raise ValueError(f"load_checkpoint: the optimizer structure of {path} is corrupt")
    if kind == "value":
        return value
    if kind in ("dict", "odict"):
        pairs = [(k, _unpack(v, tensors, path)) for k, v in value]
        return OrderedDict(pairs) if kind == "odict" else dict(pairs)
    if kind in ("list", "tuple"):
        items = [_unpack(v, tensors, path) for v in value]
        return items if kind == "list" else tuple(items)
    raise ValueError(f"load_checkpoint: the optimizer structure of {path} is corrupt (unknown node '{kind}')")


def _flatten_optimizer(state):
    tensors, keys = [], set()
    skeleton = _pack(state, "", tensors, keys)
    text = json.dumps(skeleton).encode()
    tensors.append((_STRUCTURE_KEY, _C.from_numpy(np.frombuffer(text, dtype=np.uint8).copy())))
    return tensors


def _unflatten_optimizer(entries, path):
    tensors = OrderedDict(entries)
    structure = tensors.pop(_STRUCTURE_KEY, None)
    if structure is None:  # written by C++: flat keys
        return tensors
    try:
        skeleton = json.loads(bytes(structure.numpy()).decode())
    except (ValueError, UnicodeDecodeError):
        raise ValueError(f"load_checkpoint: the optimizer structure of {path} is corrupt") from None
    return _unpack(skeleton, tensors, path)


# ---- metadata -----------------------------------------------------------------------------------

def _encode_metadata(metadata):
    out = []
    for key, value in metadata.items():
        try:
            out.append((key, json.dumps(value, allow_nan=True)))
        except (TypeError, ValueError) as e:
            raise TypeError(f"save_checkpoint: metadata '{key}' ({type(value).__name__}) is not JSON-serializable: "
                            f"{e}") from None
    return out


def _decode_metadata(entries):
    out = {}
    for key, text in entries:
        try:
            out[key] = json.loads(text)
        except ValueError:
            out[key] = text
    return out


# ---- public API ---------------------------------------------------------------------------------

def save_checkpoint(path, model, optimizer=None, **metadata):
    """Saves ``model.state_dict()``, ``optimizer.state_dict()`` (if given) and ``metadata`` (JSON
    values, e.g. ``epoch=3``) to ``path``, atomically."""
    op = "save_checkpoint"
    path = _path_arg(path, op)
    _check_model(model, op)
    model_entries = list(model.state_dict().items())
    optimizer_entries = []
    if optimizer is not None:
        _check_optimizer(optimizer, op, "state_dict")
        optimizer_entries = _flatten_optimizer(optimizer.state_dict())
    _C._save_checkpoint(path, model_entries, optimizer_entries, _encode_metadata(metadata))


def load_checkpoint(path, model, optimizer=None):
    """Loads a checkpoint written by save_checkpoint (or by C++ strata::save_checkpoint) into
    ``model`` (strictly: every key must match) and, if given, ``optimizer``; returns the metadata
    as a dict. All or nothing: the model's and a strata optimizer's states are validated (by the
    C++ ``check_state_dict`` of each) before either changes, so an error naming the bad key leaves
    both as they were; for an optimizer of another kind, the model is put back when its
    ``load_state_dict`` raises."""
    op = "load_checkpoint"
    path = _path_arg(path, op)
    _check_model(model, op)
    if optimizer is not None:
        _check_optimizer(optimizer, op, "load_state_dict")
    model_entries, optimizer_entries, metadata = _C._load_checkpoint(path)
    model_state = OrderedDict(model_entries)
    optimizer_state = None
    if optimizer is not None:
        if not optimizer_entries:
            raise ValueError(f"load_checkpoint('{path}'): the checkpoint holds no optimizer state")
        optimizer_state = _unflatten_optimizer(optimizer_entries, path)
    model._check_state_dict(model_state)
    checked = optimizer is None or callable(getattr(optimizer, "_check_state_dict", None))
    if optimizer is not None and checked:
        optimizer._check_state_dict(optimizer_state)
    backup = None if checked else OrderedDict((k, v.clone()) for k, v in model.state_dict().items())
    model.load_state_dict(model_state)
    if optimizer is not None:
        try:
            optimizer.load_state_dict(optimizer_state)
        except BaseException:
            if backup is not None:
                model.load_state_dict(backup)
            raise
    return _decode_metadata(metadata)
