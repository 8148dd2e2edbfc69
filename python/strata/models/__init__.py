"""strata.models: the model zoo with PyTorch/torchvision-style constructors.

Every model is a :class:`strata.nn.Module` whose state_dict keys are those of the equivalent
torchvision model (ResNet, VGG, DenseNet) or of the public DLRM reference, so their weights load
from ``{k: v.numpy() for k, v in torch_model.state_dict().items()}``.
"""

from __future__ import annotations

from .._C import models as _zoo
from .._C.models import (
    DLRM,
    MLP as _MLP,
    BasicBlock,
    Bottleneck,
    DenseBlock,
    DenseLayer,
    GPT,
)
from . import gpt  # noqa: E402  (strata.models.gpt)
from ..nn import Module as _Module
from ..nn import _copy as _nn_copy

# copy.deepcopy and pickle of the zoo's models (python/strata/nn/_copy.py).
_nn_copy._install([c for c in vars(_zoo).values() if isinstance(c, type) and issubclass(c, _Module)])

__all__ = [
    "MLP",
    "VGG",
    "vgg11",
    "vgg13",
    "vgg16",
    "vgg19",
    "deep_vgg",
    "ResNet",
    "resnet18",
    "resnet34",
    "resnet50",
    "resnet101",
    "resnet152",
    "resnet200",
    "cifar_resnet",
    "DenseNet",
    "densenet121",
    "densenet161",
    "densenet169",
    "densenet201",
    "densenet264",
    "DLRM",
    "BasicBlock",
    "Bottleneck",
    "DenseLayer",
    "DenseBlock",
    "GPT",
    "gpt",
]

MLP = _MLP
ResNet = _zoo.ResNet
DenseNet = _zoo.DenseNet

# torchvision's configuration letters.
_VGG_LETTERS = {"A": 11, "B": 13, "D": 16, "E": 19}


def _vgg_config(config):
    """A VGG configuration: a depth (11, 13, 16, 19, or 16 + 5k for the deep variants), one of
    torchvision's letters "A", "B", "D", "E", or a list of widths with "M" (or 0) for max pools."""
    if isinstance(config, str):
        if config not in _VGG_LETTERS:
            raise ValueError(f"VGG: unknown configuration '{config}' (expected one of A, B, D, E, a depth or a list)")
        return list(_zoo.vgg_config(_VGG_LETTERS[config]))
    if isinstance(config, bool):
        raise TypeError("VGG: config must be a depth, a configuration letter or a list of widths, got bool")
    if isinstance(config, int):
        if config in (11, 13, 16, 19):
            return list(_zoo.vgg_config(config))
        return list(_zoo.deep_vgg_config(config))
    try:
        items = list(config)
    except TypeError:
        raise TypeError(f"VGG: config must be a depth, a configuration letter or a list of widths, got "
                        f"{type(config).__name__}") from None
    out = []
    for v in items:
        if isinstance(v, str) and v == "M":
            out.append(0)
        elif isinstance(v, int) and not isinstance(v, bool) and v >= 0:
            out.append(v)
        else:
            raise ValueError(f"VGG: configuration entries must be positive widths or 'M' (or 0), got {v!r}")
    return out


def VGG(config, batch_norm=False, num_classes=1000, in_channels=3, pool_size=7, hidden=4096, dropout=0.5):  # noqa: N802
    """VGG of torchvision's structure and names (features, avgpool, classifier)."""
    return _zoo.VGG(_vgg_config(config), batch_norm=batch_norm, num_classes=num_classes, in_channels=in_channels,
                    pool_size=pool_size, hidden=hidden, dropout=dropout)


def vgg11(**kw):
    return VGG(11, **kw)


def vgg13(**kw):
    return VGG(13, **kw)


def vgg16(**kw):
    return VGG(16, **kw)


def vgg19(**kw):
    return VGG(19, **kw)


def deep_vgg(depth, **kw):
    """The very deep VGGs of AutoTM (depth 16 + 5k: 116, 416, ...): VGG-16 with k more 3x3
    convolutions per block."""
    return VGG(list(_zoo.deep_vgg_config(depth)), **kw)


def _resnet(depth, kw):
    layers, bottleneck = _zoo.resnet_config(depth)
    for key in ("layers", "bottleneck"):
        if key in kw:
            raise TypeError(f"resnet{depth}() got an unexpected keyword argument '{key}'")
    return ResNet(layers, bottleneck=bottleneck, **kw)


def resnet18(**kw):
    return _resnet(18, kw)


def resnet34(**kw):
    return _resnet(34, kw)


def resnet50(**kw):
    return _resnet(50, kw)


def resnet101(**kw):
    return _resnet(101, kw)


def resnet152(**kw):
    return _resnet(152, kw)


def resnet200(**kw):
    return _resnet(200, kw)


def cifar_resnet(depth, num_classes=10):
    """The CIFAR ResNets of He et al. 2015 (depth 6n + 2: 20, 32, 56, 110, ...)."""
    layers, widths = _zoo.cifar_resnet_config(depth)
    return ResNet(layers, widths=widths, stem="cifar", num_classes=num_classes)


def _densenet(depth, kw):
    growth_rate, block_config, num_init_features = _zoo.densenet_config(depth)
    for key in ("growth_rate", "block_config", "num_init_features"):
        if key in kw:
            raise TypeError(f"densenet{depth}() got an unexpected keyword argument '{key}'")
    return DenseNet(growth_rate=growth_rate, block_config=block_config, num_init_features=num_init_features, **kw)


def densenet121(**kw):
    return _densenet(121, kw)


def densenet161(**kw):
    return _densenet(161, kw)


def densenet169(**kw):
    return _densenet(169, kw)


def densenet201(**kw):
    return _densenet(201, kw)


def densenet264(**kw):
    return _densenet(264, kw)
