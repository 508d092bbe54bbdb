"""A gradient the backward drops (``gradient-dropped``).

The backward a forward/backward split makes returns one gradient per flat input
of the forward, None where it gives none. By Thunder's semantics an input that
requires grad and reaches the returned output through symbols Thunder
differentiates (not ``detach``, a zero-gradient prim, a region recorded with
grad disabled, or a custom ``autograd.Function``, whose backward is the
program's) gets a gradient, as eager PyTorch gives it one. A backward that
returns None for it computes something else, silently: the jitted function's
result has no ``grad_fn``, or the input's ``.grad`` stays None (#1787: the
copy that ``Tensor.to(copy=True)`` decomposed into made a tensor Thunder took
for one needing no gradient). Reads only::

    >>> import torch, thunder
    >>> jitted = thunder.jit(lambda x: x.to(copy=True) * 2)
    >>> _ = jitted(torch.ones(2, requires_grad=True))
    >>> program = thunder.last_traces(jitted)[0]
    >>> fw, bw = thunder.last_traces(jitted)[-1], thunder.last_backward_traces(jitted)[-1]
    >>> dropped_gradients(program, fw, bw, grad_enabled=True)
    []
"""

from __future__ import annotations

from safe_tracectx._support.extras import require_thunder

require_thunder("safe_tracectx.traces.dropped_gradients")

from typing import Any, Final

from thunder.core.prims import PrimIDs
from thunder.core.proxies import TensorProxy
from thunder.core.pytree import tree_flatten

from safe_tracectx._support.labels import describe_trace
from safe_tracectx.traces.bound_proxies import proxy_args
from safe_tracectx.traces.grad_mode import meta_definer, needing_inputs, tensor_outs, written
from safe_tracectx.traces.gradient_flow import (
    differentiated, floating, gradient_reads, gradient_walk, storages,
)
from safe_tracectx.traces.program import Program
from safe_tracectx.traces.violations import Violation, bsym_label

__all__ = ["dropped_gradients"]


def dropped_gradients(program: Any, fw: Any, bw: Any | None, *, grad_enabled: bool) -> list[Violation]:
    """Each flat input of ``fw`` that requires grad in ``program`` (the trace the split differentiates, in the
    jit call's mode ``grad_enabled``) and reaches what it returns through symbols Thunder differentiates, for
    which ``bw`` returns None (every one, when the split made no backward: ``bw`` None)."""
    # The gradients are the flat inputs' by position: the program's own names (the forward's 'flat_args' may hold
    # the values after an in-place update instead).
    inputs, _ = tree_flatten((program.args, program.kwargs))  # type: ignore[no-untyped-call]
    gradients = [None] * len(inputs) if bw is None else Program(bw).gradients()
    if gradients is None or len(inputs) != len(gradients):
        return []  # a count that does not match is handover-mismatch's
    needing = needing_inputs(program)
    dropped = [p for p, g in zip(inputs, gradients)
               if g is None and isinstance(p, TensorProxy) and p.name in needing and floating(p)]
    if not dropped:
        return []
    by_split = differentiated(program, grad_enabled=grad_enabled)
    root = storages(program)
    # An input the program returns as it is gets that output's gradient from autograd directly, not from the
    # backward, whose gradient for it covers only the other paths: they are what is judged.
    reach, through = gradient_walk(program, by_split, root, through_own_backwards=False, from_inputs=False)
    return [_dropped(p.name, program, through, fw, bw) for p in dropped if root.get(p.name, p.name) in reach]


def _path(name: str, program: Any, through: list[int]) -> list[tuple[int, Any]]:
    """The top-level symbols a gradient of the output flows through back to ``name``, in program order."""
    carrying, path = {name}, []
    for index in through:
        bsym = program.bound_symbols[index]
        if gradient_reads(bsym) & carrying:
            carrying |= {p.name for p in tensor_outs(bsym) if floating(p)} | written(bsym)
            path.append((index, bsym))
    return path


def _copy_gives_no_gradient() -> bool:
    """Whether this Thunder's grad rule of ``prims.copy_`` gives its source no gradient (``lambda g: (None, None)``
    before Thunder 0.2.4: in-place updates were left to functionalization, which replaces only top-level symbols)."""
    import thunder.core.transforms as transforms

    rule = getattr(transforms, "backward_impls", {}).get(PrimIDs.COPY_)
    try:
        gradients = rule(_PROBE) if callable(rule) else None
    except Exception:  # noqa: BLE001 - a rule that needs real values: not the plain lambda asked about
        return False
    return isinstance(gradients, tuple) and bool(gradients) and gradients[0] is None


_PROBE: Final = object()


def _copied(bsym: Any, carrying: set[str]) -> str | None:
    """How ``bsym``'s decomposition copies a tensor carrying the gradient (``prims.copy_``): ``"new"`` into a tensor
    it made itself (``t0 = prims.empty(...); t1 = prims.copy_(a, t0)``: a new value computed by an in-place prim),
    ``"update"`` into one of its arguments (the program's own in-place copy), None if it does not."""
    given = {p.name for p in proxy_args(bsym)}
    for sub in getattr(bsym, "subsymbols", ()):
        if getattr(sub.sym, "id", None) == PrimIDs.COPY_ and len(sub.args) > 1:
            source, into = sub.args[0], sub.args[1]
            if isinstance(source, TensorProxy) and source.name in carrying:
                return "update" if getattr(into, "name", None) in given else "new"
        elif (how := _copied(sub, carrying)) is not None:
            return how
    return None


def _in_place_step() -> tuple[str, str]:
    """The step of this Thunder that makes a read after an in-place update read the updated value."""
    import importlib.util

    if importlib.util.find_spec("thunder.core.update_aliases") is not None:
        return ("alias updates", "thunder.core.update_aliases.insert_alias_updates")
    return ("functionalization", "thunder.core.functionalization.functionalize_inplace_ops")


#: Charged for a copy_ of the program's own whose source gets no gradient: the table of grad rules.
_COPY_RULE: Final = ("the grad rule of prims.copy_", "thunder.core.transforms.backward_impls")


def _blame(name: str, path: list[tuple[int, Any]]) -> tuple[str, tuple[str, ...], tuple[str, str]] | None:
    """(why the gradient is lost, the names that show it, who is charged) when the path shows where; None if not."""
    wrote: dict[str, tuple[int, Any]] = {}
    for index, bsym in path:
        stale = sorted(n for n in gradient_reads(bsym) if n in wrote)
        if stale:
            at, writer = wrote[stale[0]]
            label, qualname = _in_place_step()
            outs = tuple(p.name for p in tensor_outs(bsym) if floating(p))
            return (f"{bsym_label(index, bsym)} reads {stale[0]} after {bsym_label(at, writer)} updated it in place, "
                    "under its name from before the update: by Thunder's semantics it reads the old value, so the "
                    f"gradient through the update is lost; {label} ({qualname}), the step that makes reads after an "
                    "in-place update read the updated value, left it", (stale[0], *outs), (label, qualname))
        wrote.update((n, (index, bsym)) for n in written(bsym))
    if not _copy_gives_no_gradient():
        return None
    carrying = {name}
    for index, bsym in path:
        how = _copied(bsym, carrying)
        outs = tuple(p.name for p in tensor_outs(bsym) if floating(p))
        if how == "new":
            definer = meta_definer(bsym)
            made_by = f" (its meta, {definer[1]}, made it)" if definer else ""
            return (f"the gradient is lost at {bsym_label(index, bsym)}{made_by}, whose decomposition computes "
                    f"{', '.join(outs)} by copying into a tensor it made (prims.copy_), and this Thunder's grad rule "
                    "of prims.copy_ gives the copy's source no gradient", outs,
                    definer if definer is not None else (bsym_label(index, bsym), str(bsym.sym.id)))
        if how == "update":
            return (f"the gradient is lost at {bsym_label(index, bsym)}, the program's own copy into a tensor, "
                    f"whose result {', '.join(outs)} the program uses: this Thunder's grad rule of prims.copy_ "
                    "gives the copy's source no gradient", outs, _COPY_RULE)
        carrying |= {p.name for p in tensor_outs(bsym)}
    return None


def _step(index: int, bsym: Any) -> str:
    outs = ", ".join(p.name for p in tensor_outs(bsym) if floating(p))
    return f"{outs} = {bsym_label(index, bsym)}" if outs else bsym_label(index, bsym)


def _dropped(name: str, program: Any, through: list[int], fw: Any, bw: Any) -> Violation:
    path = _path(name, program, through)
    steps = ", ".join(_step(i, b) for i, b in path[:4]) + (", ..." if len(path) > 4 else "")
    returns = ("the backward returns no gradient (None)" if bw is not None
               else "the split makes no backward, so it gives no gradient")
    message = (f"{returns} for {name}, which requires grad and reaches what the "
               f"program returns through symbols Thunder differentiates ({steps}): eager PyTorch gives {name} "
               "a gradient, so the program computes something else (its result has no grad_fn, or the "
               f"gradient of {name} stays None)")
    where = f"return of {describe_trace(bw)}" if bw is not None else f"no backward for {describe_trace(fw)}"
    blame = _blame(name, path)
    if blame is None:
        return Violation("gradient-dropped", name, message, where)
    because, also, culprit = blame
    return Violation("gradient-dropped", name, f"{message}; {because}", where, also=also, culprit=culprit)
