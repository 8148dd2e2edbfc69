"""Rematerialization policies for :class:`strata.nn.RematSequential`.

A ``RematSequential`` runs its children as a chain whose saved values (what backward reads) are
treated per policy (autograd/remat/chain.h):

- ``store_all()``: keep everything (the plain forward).
- ``recompute_all()``: checkpoint every child; all saved values are recomputed in backward.
- ``every_k(k)``: checkpointed segments of ``k`` children (``torch.utils.checkpoint_sequential``'s
  idea with a segment length instead of a count); ``sqrt_n()`` takes ``k = ceil(sqrt(n))``.
- ``revolve(snapshots)``: binomial checkpointing (Griewank's Revolve) with ``snapshots`` stored
  states, the input included.
- ``auto(budget_bytes, granularity="op", slow_placement=True)``: for every saved value keep it in
  the fast tier, stream it to the slow tier and back, recompute it, or place it in the slow tier
  (the child writes its output there and every kernel reading it uses it in place, as AutoTM
  places tensors in PM; ``slow_placement=False`` plans without), chosen by an ILP (GLPK) to
  minimize the predicted step time while the fast-tier activation peak stays within
  ``budget_bytes`` (DESIGN.md §3 autograd, Note [Auto planning model]). Placement is what reaches
  budgets below a child's input plus its output. Costs come from profiling each child (op) once per input shape;
  a new shape re-plans. ``granularity="op"`` plans ResNet blocks and nested Sequentials per op,
  ``"step"`` one program point per child. A budget below what any plan reaches raises
  ``strata.StrataError`` naming the minimum. ``RematSequential.explain()`` prints the plan and
  the measured peak; ``RematSequential.last_plan()`` summarizes it as a dict.

The budget covers activations (what forward saves and backward's gradients of them), not
parameters or their ``.grad``: the model treats parameter gradients as allocated before the step,
so compare ``last_plan()["measured_peak_bytes"]`` with the budget on a step after
``zero_grad(set_to_none=False)`` (the first step after ``zero_grad()`` also allocates them).

Gradients are bitwise those of the plain forward for deterministic children, under every
policy. Running statistics of batch norm are updated once per forward even when it is
recomputed (Note [Module side effects under recomputation]). Auto needs the tiered memory (the
default allocator unless ``STRATA_MEMORY=dram``).

Example::

    model = strata.nn.RematSequential(*blocks, policy=strata.remat.auto(64 << 20))
    loss = loss_fn(model(x), y)
    loss.backward()
    print(model.explain())
"""

from ._C.remat import Policy, auto, every_k, recompute_all, revolve, sqrt_n, store_all
from ._C.nn import RematSequential

__all__ = ["Policy", "RematSequential", "auto", "every_k", "recompute_all", "revolve", "sqrt_n", "store_all"]
