"""strata.utils: helpers with torch.utils' names (``strata.utils.checkpoint``, ``strata.utils.data``,
``strata.utils.hooks``)."""

from . import checkpoint
from . import data
from . import hooks

__all__ = ["checkpoint", "data", "hooks"]
