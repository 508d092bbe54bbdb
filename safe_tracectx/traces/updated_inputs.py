"""The inputs a program updates in place with grad enabled: where eager PyTorch's leaf rule applies.

Eager PyTorch refuses an in-place update of a leaf tensor that requires grad, or of a
view of one, while grad is enabled ("a leaf Variable that requires grad is being used
in an in-place operation"); under ``torch.no_grad()`` it allows it (an optimizer's
step). Whether an input is such a leaf is known only at the call (a proxy carries
``requires_grad``, not ``is_leaf``), so this finds, in the trace the interpretation
made, each argument that a ``copy_`` writes into, itself or through a view eager also
makes, with the grad mode there followed from the trace's markers. Reads only::

    >>> import torch, thunder
    >>> from safe_tracectx.traces.updated_inputs import updated_under_grad
    >>> def step(p, g):
    ...     with torch.no_grad():
    ...         p.sub_(g)  # allowed: grad is disabled here
    ...     return p.view(2, 2).mul_(2)  # p, through a view, with grad enabled
    >>> jitted = thunder.jit(step)
    >>> _ = jitted(torch.ones(4), torch.ones(4))
    >>> [(u.input, u.written) for u in updated_under_grad(thunder.last_traces(jitted)[0], grad_enabled=True)]
    [('p', 't2')]
"""

from __future__ import annotations

from safe_tracectx._support.extras import require_thunder

require_thunder("safe_tracectx.traces.updated_inputs")

from typing import Any, NamedTuple

from thunder.core.proxies import TensorProxy

from safe_tracectx.traces.bound_proxies import proxy_args
from safe_tracectx.traces.grad_mode import MARKER, marker_mode, tensor_outs, written
from safe_tracectx.traces.skipped_updates import takes_view

__all__ = ["InputUpdate", "updated_under_grad"]


class InputUpdate(NamedTuple):
    """An in-place update of an argument of the trace, made with grad enabled."""

    #: The argument's name.
    input: str
    #: The name written into: the argument, or a view of it.
    written: str
    #: The top-level symbol that writes it, and its index.
    at: int
    bsym: Any


def updated_under_grad(trace: Any, *, grad_enabled: bool, until: int | None = None) -> list[InputUpdate]:
    """Each update (the first per argument) of an argument of ``trace``, or of a view of one, made where the
    program's grad mode is enabled (``grad_enabled``: the mode at the start of the trace), judged up to the
    top-level symbol ``until`` (where the markers stop being eager's: ``hooks.grad_mode_requests``).

    Inside a jitted function ``torch.is_grad_enabled()`` reads PyTorch's mode, which Thunder leaves at the start
    mode, so a marker is taken for eager's only while the program is in the start mode (``no_grad``'s exit
    restores what its entry read, which inside a nested region is not eager's): nothing after a marker made in
    another mode is judged."""
    roots = {p.name: p.name for p in getattr(trace, "args", None) or () if isinstance(p, TensorProxy)}
    enabled: bool | None = grad_enabled
    found: dict[str, InputUpdate] = {}
    for index, bsym in enumerate(trace.bound_symbols[:until]):
        if getattr(bsym.sym, "id", None) == MARKER:
            if enabled != grad_enabled or (enabled := marker_mode(bsym)) is None:
                break
            continue
        targets = [roots[name] for name in written(bsym) if name in roots]
        if enabled:
            for name in sorted(written(bsym)):
                if name in roots and roots[name] not in found:
                    found[roots[name]] = InputUpdate(roots[name], name, index, bsym)
        given = proxy_args(bsym)
        if len(set(targets)) == 1:  # an in-place op's result is its target
            root = targets[0]
        elif takes_view(bsym) and given and given[0].name in roots:
            root = roots[given[0].name]
        else:
            continue
        for out in tensor_outs(bsym):
            roots.setdefault(out.name, root)
    return list(found.values())
