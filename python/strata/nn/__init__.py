"""strata.nn: modules and layers with torch.nn's names and behaviour.

Subclass :class:`Module` exactly as ``torch.nn.Module``: call ``super().__init__()``, assign
:class:`Parameter` s and modules as attributes, define ``forward``. Python modules also run inside
the C++ containers (``Sequential``) and models.
"""

from .._C.nn import (
    AdaptiveAvgPool2d,
    AvgPool2d,
    BatchNorm1d,
    BatchNorm2d,
    Conv2d,
    Dropout,
    EmbeddingBag,
    Flatten,
    GELU,
    Identity,
    IncompatibleKeys,
    LayerNorm,
    LeakyReLU,
    Linear,
    MaxPool2d,
    Module,
    ModuleList,
    Parameter,
    ReLU,
    RematSequential,
    Sequential,
    Sigmoid,
    Tanh,
)
from .._C.nn import (  # issue 26 parts 7-8
    Embedding,
    LogSoftmax,
    MultiheadAttention,
    SiLU,
    Softmax,
    TransformerEncoderLayer,
)
from .._C.nn import (  # issue 26 part 7
    Conv1d,
    ConvTranspose2d,
    GroupNorm,
    ModuleDict,
    ParameterList,
)


def _accept_factory_kwargs(cls):
    """Lets the layer take torch.nn's factory keywords, `Linear(3, 4, dtype=strata.float64,
    device="cpu")`: the C++ constructor builds it and Module.to (C++) converts its parameters and
    buffers and refuses any device but the CPU, as for `model.to(...)`."""
    construct = cls.__init__

    def __init__(self, *args, device=None, dtype=None, **kwargs):
        construct(self, *args, **kwargs)
        if device is not None or dtype is not None:
            self.to(**{k: v for k, v in (("device", device), ("dtype", dtype)) if v is not None})

    __init__.__doc__ = construct.__doc__
    cls.__init__ = __init__


for _layer in (BatchNorm1d, BatchNorm2d, Conv1d, Conv2d, ConvTranspose2d, Embedding, EmbeddingBag, GroupNorm,
               LayerNorm, Linear, MultiheadAttention, TransformerEncoderLayer):
    _accept_factory_kwargs(_layer)

from . import _copy
from . import functional
from . import init
from . import utils
from .loss import BCELoss, BCEWithLogitsLoss, CrossEntropyLoss, L1Loss, MSELoss, NLLLoss

__all__ = [
    "AdaptiveAvgPool2d",
    "AvgPool2d",
    "BatchNorm1d",
    "BatchNorm2d",
    "Conv2d",
    "Dropout",
    "EmbeddingBag",
    "Flatten",
    "GELU",
    "Identity",
    "IncompatibleKeys",
    "LayerNorm",
    "LeakyReLU",
    "Linear",
    "MaxPool2d",
    "Module",
    "ModuleList",
    "Parameter",
    "ReLU",
    "RematSequential",
    "Sequential",
    "Sigmoid",
    "Tanh",
    "functional",
    "init",
    "utils",
    # issue 26 parts 7-8
    "BCELoss",
    "BCEWithLogitsLoss",
    "CrossEntropyLoss",
    "Embedding",
    "L1Loss",
    "LogSoftmax",
    "MSELoss",
    "MultiheadAttention",
    "NLLLoss",
    "SiLU",
    "Softmax",
    "TransformerEncoderLayer",
    # issue 26 part 7
    "Conv1d",
    "ConvTranspose2d",
    "GroupNorm",
    "ModuleDict",
    "ParameterList",
]

# copy.deepcopy and pickle of modules (python/strata/nn/_copy.py).
_copy._install([Module] + [c for c in (globals()[n] for n in __all__) if isinstance(c, type) and issubclass(c, Module)])
