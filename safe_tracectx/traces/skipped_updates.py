"""A gradient that skips an in-place update of an alias (``gradient-skips-update``).

Thunder's alias-update step (``insert_alias_updates``) follows each in-place
update of a tensor with ``prims.update_aliases`` over the tensors that share its
storage: the update's output and the other aliases, each from before the update
(a view taken earlier). The values it hands on are the storage as updated, but
the grad rule of ``update_aliases`` gives each output's gradient to the input
at its position, so the gradient of an alias read after the update flows to its
value from before the update and skips the update: ``a = x * 1; b = a.view(3);
a.mul_(2); return b * y`` gives ``x`` the gradient ``y`` where eager PyTorch gives
``2 * y``, silently (Thunder 0.2.6 and main). Reads only::

    >>> import torch, thunder
    >>> from safe_tracectx.traces.skipped_updates import skipped_updates
    >>> def f(x, y):
    ...     a = x * 1
    ...     a.mul_(2)  # no other alias: nothing skips the update
    ...     return a * y
    >>> jitted = thunder.jit(f)
    >>> _ = jitted(torch.ones(3, requires_grad=True), torch.ones(3))
    >>> skipped_updates(thunder.last_traces(jitted)[0], grad_enabled=True)
    []
"""

from __future__ import annotations

from safe_tracectx._support.extras import require_thunder

require_thunder("safe_tracectx.traces.skipped_updates")

from typing import Any, Final

from thunder.core.prims import PrimIDs
from thunder.core.proxies import TensorProxy

from safe_tracectx.traces.grad_mode import needing_inputs, tensor_outs, written
from safe_tracectx.traces.gradient_flow import differentiated, floating, gradient_reads, gradient_walk, storages
from safe_tracectx.traces.violations import Violation, bsym_label

__all__ = ["skipped_updates"]

#: ``prims.update_aliases`` (Thunder >= 0.2.4; before it, functionalization made no aliases to hand on).
_UPDATE_ALIASES: Final = getattr(PrimIDs, "UPDATE_ALIASES", None)
#: Charged: the rule that sends each handed-on alias's gradient to its value from before the update.
_RULE: Final = ("the grad rule of prims.update_aliases", "thunder.core.transforms._update_aliases_prim_grad")


def skipped_updates(program: Any, *, grad_enabled: bool) -> list[Violation]:
    """Each alias that an ``update_aliases`` of ``program`` (the trace the split differentiates, in the jit call's
    grad mode ``grad_enabled``) hands on from before an in-place update of its storage, where the update is
    differentiated, the alias or the update carries a gradient, and the alias reaches what the program returns."""
    bsyms = program.bound_symbols
    if _UPDATE_ALIASES is None or not any(b.sym.id == _UPDATE_ALIASES for b in bsyms):
        return []
    by_split = differentiated(program, grad_enabled=grad_enabled)
    root = storages(program)
    reach, _ = gradient_walk(program, by_split, root)
    needing = needing_inputs(program)
    defined = {p.name: -1 for p in getattr(program, "args", None) or () if isinstance(p, TensorProxy)}
    updated_at: dict[str, int] = {}  # the output of an in-place symbol -> its index
    origin: dict[str, str] = {}  # what update_aliases hands on -> the name the program gave that alias first
    found: list[Violation] = []
    for index, bsym in enumerate(bsyms):
        outs = tensor_outs(bsym)
        if by_split[index] and gradient_reads(bsym) & needing:
            needing = needing | {p.name for p in outs if floating(p)} | written(bsym)
        if written(bsym):
            updated_at.update((p.name, index) for p in outs)
        elif bsym.sym.id == _UPDATE_ALIASES and bsym.args:
            pairs = [(p, q) for p, q in zip(bsym.args[0], outs) if isinstance(p, TensorProxy)]
            origin.update((q.name, origin.get(p.name, p.name)) for p, q in pairs)
            found += _skipping(index, bsym, pairs, program, updated_at, defined, by_split, needing, reach, root, origin)
        for proxy in outs:
            defined.setdefault(proxy.name, index)
    return found


def _skipping(
    index: int, bsym: Any, pairs: list[tuple[Any, Any]], program: Any, updated_at: dict[str, int],
    defined: dict[str, int], by_split: list[bool], needing: set[str], reach: set[str], root: dict[str, str],
    origin: dict[str, str],
) -> list[Violation]:
    """The aliases this ``update_aliases`` hands on from before the latest in-place update among its inputs."""
    updates = [(updated_at[p.name], p) for p, _ in pairs if p.name in updated_at]
    if not updates:
        return []  # the step before an in-place update (or a view), not after one
    at, update = max(updates, key=lambda u: u[0])
    if not by_split[at]:
        return []  # an update the split does not differentiate (torch.no_grad): eager skips it too
    writer = program.bound_symbols[at]
    found = []
    for old, new in pairs:
        if old is update or defined.get(old.name, at) >= at or root.get(new.name, new.name) not in reach:
            continue
        if not floating(new) or not (old.name in needing or update.name in needing):
            continue
        user = origin.get(old.name, old.name)
        named = f"{user} ({new.name} here)" if user != new.name else new.name
        found.append(Violation(
            "gradient-skips-update", new.name,
            f"{bsym_label(index, bsym)} hands on {named} after {bsym_label(at, writer)} updated its storage in place "
            f"({update.name}): {new.name} holds the updated values, but Thunder's grad rule of update_aliases gives "
            f"its gradient to {old.name}, the value from before the update, so the gradient skips the update and "
            "the program's gradients are other than eager PyTorch's, silently",
            f"{bsym_label(index, bsym)}", also=(old.name, update.name, user), culprit=_RULE,
        ))
    return found
