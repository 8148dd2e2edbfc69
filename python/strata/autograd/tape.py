"""Tape introspection: what the recorded graph below some tensors keeps for backward (JAX's
``print_saved_residuals``)."""

from .. import _C


def recorded_nodes(tensors):
    """Every node reachable from ``tensors`` (a Tensor or a sequence), oldest first, as dicts:
    ``name``, ``sequence_nr``, ``outputs`` (list of {shape, dtype}) and ``saved`` (list of
    {shape, dtype, bytes, tier, packed, released}, in the order the op saved them). AccumulateGrad
    nodes are left out."""
    return _C._recorded_nodes(tensors)


def saved_bytes(tensors):
    """Total bytes of the saved values the graph below ``tensors`` still holds."""
    return _C._saved_bytes(tensors)


def format_saved_residuals(tensors):
    """A table, one line per saved value (node, index, shape, dtype, bytes, tier), and a total."""
    return _C._format_saved_residuals(tensors)


def print_saved_residuals(tensors):
    """Prints format_saved_residuals(tensors)."""
    print(format_saved_residuals(tensors))


__all__ = ["format_saved_residuals", "print_saved_residuals", "recorded_nodes", "saved_bytes"]
