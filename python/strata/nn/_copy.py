"""``copy.deepcopy`` and ``pickle`` of modules (the pickle protocol is Python's; the tensors'
copies are C++: Note [Copying and pickling tensors] in python/src/tensor_bindings.cpp).

A module is rebuilt, not copied field by field: its C++ class (the nearest one in its MRO) is
constructed again with the arguments its ``__init__`` received — which every C++ module class
records, in the C++ module (``_install``; ``Module::binding_data``) — so its structure, including weights a C++ model ties itself (the GPT's
output head), comes back as built; then its own parameters, buffers, children, training flag and
Python attributes (``__dict__``) are set from the original's. A Python subclass's own ``__init__``
is not run again (as in PyTorch). Within one deepcopy a tensor is copied once, so parameters two
modules share stay shared; a pickle keeps the sharing that the C++ construction makes (ties made
by Python code are copied apart, a limitation). Constructing again draws from the random
generator; the global generator's state is restored afterwards, so a copy does not change later
random numbers."""

import copy
import functools

from .. import _C
from ..autograd.grad_mode import no_grad

_TENSORS = "_strata_tensors"  # memo entry: tensor identity → its copy (Note above)


def _install(classes):
    """Makes each C++ module class record the arguments of its ``__init__``."""
    for cls in classes:
        if cls.__module__.startswith("strata._C") and "__init__" in cls.__dict__ and \
                not getattr(cls.__init__, "_strata_records", False):
            cls.__init__ = _recording(cls.__init__)
        cls.__deepcopy__ = _module_deepcopy
        cls.__reduce_ex__ = _module_reduce_ex


def _recording(init):
    @functools.wraps(init)
    def __init__(self, *args, **kwargs):
        init(self, *args, **kwargs)
        self._set_init_args((args, kwargs))

    __init__._strata_records = True
    return __init__


def _cpp_base(cls):
    for base in cls.__mro__:
        if base.__module__.startswith("strata._C"):
            return base
    raise TypeError(f"{cls.__name__} is not a strata.nn.Module")


def _built_by_cpp(module):
    """True for a module C++ code made (every module made from Python recorded its arguments)."""
    return module._get_init_args() is None


def _init_args(module):
    """The (args, kwargs) of the module's C++ class; a module built by C++ code (a zoo model's
    child) has none and is only copied as part of the model that built it."""
    args = module._get_init_args()
    if _built_by_cpp(module):
        base = _cpp_base(type(module))
        raise TypeError(f"cannot copy or pickle this {base.__name__} on its own: it was built by C++ code (a part of "
                        "a model from strata.models); copy or pickle the model that contains it")
    return args


def _construct(cls, init_args):
    """An instance of `cls` whose C++ part is built from `init_args`; a Python subclass's own
    ``__init__`` does not run."""
    base = _cpp_base(cls)
    args, kwargs = init_args if init_args is not None else ((), {})
    state = _C.default_generator.get_state()
    try:
        obj = cls.__new__(cls)
        base.__init__(obj, *args, **kwargs)
    finally:
        _C.default_generator.set_state(state)
    return obj


def _registered(module, kind):
    if kind == "parameter":
        return dict(module.named_parameters(recurse=False))
    if kind == "buffer":
        return dict(module.named_buffers(recurse=False))
    return dict(module.named_children())


def _put_tensor(new, name, src, kind, persistent, tensors, copy_tensor):
    """Gives `new` a copy of `src` under `name`: the copy already made for `src` (shared), else the
    tensor `new` was built with, overwritten in place (a tie its construction made stays), else a
    new copy."""
    key = src._tensor_key()
    current = _registered(new, kind).get(name)
    if key not in tensors:
        if current is not None and tuple(current.shape) == tuple(src.shape) and current.dtype == src.dtype:
            with no_grad():
                current.copy_(src)
            current.requires_grad_(src.requires_grad)
            tensors[key] = (src, current)
            return
        tensors[key] = (src, copy_tensor(src))
    value = tensors[key][1]
    if current is not None and current._tensor_key() == value._tensor_key():
        return
    if kind == "parameter":
        setattr(new, name, value)
    else:
        new.register_buffer(name, value, persistent=persistent)


def _fill(new, src, tensors, copy_tensor, copy_child, copy_value):
    """Sets `new`'s own state from `src`'s (Note above); children built by `new`'s construction of
    the same C++ class are filled in place, others are set to copy_child(child)."""
    persistent = set(src.state_dict(keep_vars=True).keys())
    for name, p in src.named_parameters(recurse=False):
        _put_tensor(new, name, p, "parameter", True, tensors, copy_tensor)
    for name, b in src.named_buffers(recurse=False):
        _put_tensor(new, name, b, "buffer", name in persistent, tensors, copy_tensor)
    children = _registered(new, "child")
    for name, c in src.named_children():
        existing = children.get(name)
        kind = c.type if isinstance(c, _Source) else type(c)
        if existing is not None and type(existing) is kind and _cpp_base(kind) is kind:
            _fill(existing, c, tensors, copy_tensor, copy_child, copy_value)
            continue
        if isinstance(c, _Source):
            raise TypeError(f"cannot rebuild child '{name}' ({kind.__name__}) of {type(new).__name__}: it was built by "
                            "C++ code and the rebuilt module has no such child")
        value = copy_child(c)
        if value is not existing:
            setattr(new, name, value)
    new.train(src.training)
    attrs = src.attrs if isinstance(src, _Source) else src.__dict__
    new.__dict__.update({k: copy_value(v) for k, v in attrs.items()})
    return new


def _module_deepcopy(self, memo):
    new = _construct(type(self), copy.deepcopy(_init_args(self), memo))
    memo[id(self)] = new
    tensors = memo.setdefault(_TENSORS, {})
    return _fill(new, self, tensors, lambda t: copy.deepcopy(t, memo), lambda c: copy.deepcopy(c, memo),
                 lambda v: copy.deepcopy(v, memo))


def _rebuild_module(cls, init_args, source):
    """pickle's constructor of a module: `source` is the unpickled stand-in of the original (its
    tensors and children already new objects)."""
    module = _construct(cls, init_args)
    same = lambda v: v  # noqa: E731
    return _fill(module, source, {}, same, same, same)


class _Source:
    """What a pickled module carries: its own tensors, children, training flag and __dict__, with
    the accessors _fill uses."""

    def __init__(self, module):
        self.type = type(module)
        self.training = module.training
        self._parameters = list(module.named_parameters(recurse=False))
        self._buffers = list(module.named_buffers(recurse=False))
        # A child built by C++ code is rebuilt by its parent's construction: only its state travels.
        self._children = [(n, _Source(c) if _built_by_cpp(c) else c) for n, c in module.named_children()]
        self._persistent = [n for n, _ in self._buffers if n in module.state_dict(keep_vars=True)]
        self.attrs = dict(module.__dict__)

    def named_parameters(self, recurse=False):
        return self._parameters

    def named_buffers(self, recurse=False):
        return self._buffers

    def named_children(self):
        return self._children

    def state_dict(self, keep_vars=False):
        return dict.fromkeys(self._persistent)


def _module_reduce_ex(self, protocol):
    return _rebuild_module, (type(self), _init_args(self), _Source(self))
