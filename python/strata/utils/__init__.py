"""strata.utils: helpers with torch.utils' names (``strata.utils.checkpoint``)."""

from . import checkpoint

__all__ = ["checkpoint"]
