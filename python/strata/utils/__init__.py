"""strata.utils: helpers with torch.utils' names (``strata.utils.checkpoint``, ``strata.utils.data``)."""

from . import checkpoint
from . import data

__all__ = ["checkpoint", "data"]
