"""strata.save / strata.load: tensors, state dicts and nested containers of them (torch.save's habits).

The file is Strata's checkpoint format (models/checkpoint.h), written atomically (a temporary file
renamed over the path, so a crash mid-save leaves any previous file intact). The object is stored
as its tensors under their dotted paths plus a JSON ``__structure__`` entry recording the nesting
(dicts, OrderedDicts, lists, tuples), the plain values (numbers, strings, booleans, None) and which
tensors were Parameters or required grad — python/strata/checkpoint.py's packing, which
save_checkpoint uses for optimizer state. Modules and other Python objects are not pickled: save
``model.state_dict()``, as PyTorch recommends. ``f`` is a path (str or os.PathLike) or a binary file
object (``io.BytesIO``, an open file).
"""

from __future__ import annotations

import json
import os
import tempfile
from collections import OrderedDict

import numpy as np

from . import _C
from .checkpoint import _STRUCTURE_KEY, _pack, _unpack

__all__ = ["save", "load"]

# Metadata that marks a file written by strata.save (a training checkpoint has none).
_MARKER = ("strata.save", "1")


def _is_file_object(f, method):
    return callable(getattr(f, method, None))


def save(obj, f, pickle_module=None, pickle_protocol=None, _use_new_zipfile_serialization=True):
    """Saves ``obj`` (a tensor, a state dict, or nested dicts/lists/tuples of tensors and plain
    values) to ``f``."""
    from .nn import Module

    if isinstance(obj, Module):
        raise TypeError("strata.save cannot save a Module object; save its state_dict() and load it into a new "
                        "module with load_state_dict()")
    tensors, keys = [], set()
    skeleton = _pack(obj, "", tensors, keys, where="strata.save: the object")
    text = json.dumps(skeleton).encode()
    tensors.append((_STRUCTURE_KEY, _C.from_numpy(np.frombuffer(text, dtype=np.uint8).copy())))
    if _is_file_object(f, "write"):
        with tempfile.TemporaryDirectory() as tmp:
            path = os.path.join(tmp, "object.strata")
            _C._save_checkpoint(path, tensors, [], [_MARKER])
            with open(path, "rb") as src:
                f.write(src.read())
        return
    try:
        path = os.fspath(f)
    except TypeError:
        raise TypeError(f"strata.save: f must be a path or a binary file object, got {type(f).__name__}") from None
    _C._save_checkpoint(path, tensors, [], [_MARKER])


def load(f, map_location=None, pickle_module=None, *, weights_only=None, mmap=None, **pickle_load_args):
    """Loads what ``strata.save`` wrote to ``f``. ``map_location`` may be None, "cpu" or a
    strata/torch-style device string naming the CPU; other devices raise ValueError."""
    if map_location is not None and str(map_location) != "cpu":
        raise ValueError(f"strata.load: map_location {map_location!r} is not available; Strata runs on the CPU")
    if _is_file_object(f, "read"):
        data = f.read()
        with tempfile.TemporaryDirectory() as tmp:
            path = os.path.join(tmp, "object.strata")
            with open(path, "wb") as dst:
                dst.write(data)
            return _load_path(path, "<file object>")
    try:
        path = os.fspath(f)
    except TypeError:
        raise TypeError(f"strata.load: f must be a path or a binary file object, got {type(f).__name__}") from None
    if not os.path.exists(path):
        raise FileNotFoundError(2, "No such file or directory", path)  # what torch.load (open) raises
    return _load_path(path, path)


def _load_path(path, name):
    entries, _, metadata = _C._load_checkpoint(path)
    if _MARKER not in [tuple(m) for m in metadata]:
        raise ValueError(f"strata.load('{name}'): the file is a training checkpoint, not written by strata.save; "
                         "read it with strata.load_checkpoint")
    tensors = OrderedDict(entries)
    structure = tensors.pop(_STRUCTURE_KEY, None)
    if structure is None:
        raise ValueError(f"strata.load('{name}'): the file lacks its structure entry")
    try:
        skeleton = json.loads(bytes(structure.numpy()).decode())
    except (ValueError, UnicodeDecodeError):
        raise ValueError(f"strata.load('{name}'): the structure entry is corrupt") from None
    return _unpack(skeleton, tensors, name)
