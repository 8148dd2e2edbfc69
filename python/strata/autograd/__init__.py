"""Automatic differentiation: grad mode switches (``strata.no_grad`` and friends)."""

from .grad_mode import enable_grad, is_grad_enabled, no_grad, set_grad_enabled

__all__ = ["enable_grad", "is_grad_enabled", "no_grad", "set_grad_enabled"]
