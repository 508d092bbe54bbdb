"""A symbol called with grad enabled whose output is detached from autograd (``detached-under-grad``).

By Thunder's semantics a symbol called while grad is disabled (``torch.no_grad()``, ``torch.set_grad_enabled(False)``,
tracked in the compile data's ``is_grad_enabled``) tags its tensor outputs ``ProxyTag.DETACHED_AUTOGRAD_GRAPH``,
and the vjp treats a symbol with a tagged output as a constant: it gets no backward. A symbol called with grad
enabled must not carry the tag, whatever its meta did inside (a higher-order function whose forward has a
``torch.no_grad()`` region: Thunder #1620); if it does, the forward/backward split gives it no gradient and the
program computes something else (its result does not require grad).

The grad mode can be followed only in a trace that still holds Thunder's grad-mode markers, the top-level
``set_grad_enabled`` symbols each ``with torch.no_grad():`` records on entry and exit: the computation trace the
interpretation makes (Thunder removes them next, "Remove context manager prims"). The walk starts at the mode the
jit call was made in, and each marker sets it::

    >>> import torch, thunder
    >>> def f(x):
    ...     with torch.no_grad():
    ...         y = x.sin()
    ...     return x.cos() + y
    >>> jitted = thunder.jit(f)
    >>> _ = jitted(torch.ones(2, requires_grad=True))
    >>> detached_under_grad(thunder.last_traces(jitted)[0], grad_enabled=True)
    []
"""

from __future__ import annotations

from safe_tracectx._support.extras import require_thunder

require_thunder("safe_tracectx.traces.grad_mode")

import dataclasses
from collections.abc import Callable, Iterable, Mapping
from typing import Any, Final, NamedTuple

from thunder.core.prims import PrimIDs
from thunder.core.proxies import ProxyTag, TensorProxy

from safe_tracectx.traces.bound_proxies import proxy_args, proxy_outs
from safe_tracectx.traces.violations import Violation, bsym_label

__all__ = ["MARKER", "Retagging", "across", "detached", "detached_across", "detached_under_grad", "differentiable",
           "marker_mode", "meta_definer", "mode_left", "needing_inputs", "recorded_by_autograd", "tensor_outs",
           "written"]

#: The id of Thunder's grad-mode marker (``thunder.torch._set_grad_enabled_with_warning``).
MARKER: Final = "set_grad_enabled"
#: Thunder's own decorators of a meta, (module, qualname) of their closure: each only sets the language context (or
#: checks its arguments' types) and calls the function it wraps, which computed the outputs.
_PASS_THROUGH: Final = frozenset({
    ("thunder.core.langctxs", "langctx.__call__.<locals>._fn"),
    ("thunder.torch", "torchsymbol.__call__.<locals>.wrapper"),
})
#: Symbols whose outputs need no grad whatever they read (``x.detach()``: Thunder tags nothing, its vjp is none).
_CUTS: Final = frozenset({"torch.detach"})


class Retagging(NamedTuple):
    """Tags a step added to a proxy it was only given (the interpretation's binding of a trace's inputs, which
    records an unpacking symbol on each proxy: called with grad disabled, ``Symbol.__call__`` tags its output,
    the proxy itself): the step (label, qualname) and the trace it bound the proxy into."""

    added: frozenset[Any]
    culprit: tuple[str, str]
    into: str
    #: The grad mode of the compilation while the step ran (None: not known).
    grad_enabled: bool | None = None


def _detached_tag() -> Any:
    """Thunder's tag (``thunder.torch`` registers it; None on a Thunder without it)."""
    import thunder.torch  # noqa: F401 - registers the tag

    return getattr(ProxyTag, "DETACHED_AUTOGRAD_GRAPH", None)


def marker_mode(bsym: Any) -> bool | None:
    """The grad mode a marker sets (None: not a plain bool, the mode cannot be followed past it)."""
    enabled = bsym.args[0] if bsym.args else bsym.kwargs.get("enabled")
    return enabled if type(enabled) is bool else None


def mode_left(trace: Any, *, grad_enabled: bool) -> tuple[bool | None, Any]:
    """(the grad mode ``trace``'s program leaves PyTorch in when it starts in ``grad_enabled``, the last grad-mode
    marker that set it): the mode is None where the markers cannot be taken for eager's events; the marker is None
    when there is none. Reads only::

        >>> from thunder.core.trace import TraceCtx
        >>> mode_left(TraceCtx(), grad_enabled=True)
        (True, None)

    Inside a jitted function ``torch.is_grad_enabled()`` reads PyTorch's mode, which Thunder leaves at the start
    mode, so a marker's value is eager's only while the program's mode is still the start mode (``no_grad``'s exit
    restores what its entry read; ``set_grad_enabled(not torch.is_grad_enabled())`` reads it then): a marker made
    after another left the start mode makes the mode unknown (None), as does one whose mode is no plain bool.
    """
    mode: bool | None = grad_enabled
    last = None
    for bsym in trace.bound_symbols:
        if getattr(bsym.sym, "id", None) == MARKER:
            if last is not None and mode != grad_enabled:
                return None, bsym
            mode, last = marker_mode(bsym), bsym
            if mode is None:
                return None, last
    return mode, last


def meta_definer(bsym: Any) -> tuple[str, str] | None:
    """(qualname, ``module.qualname``) of the function that is the symbol's meta, what computed its outputs: its own
    code, looked through only Thunder's language-context decorator, which computes nothing (any other wrapper's
    ``__wrapped__`` may point at a generated program); None if the meta is no Python function."""
    meta = getattr(getattr(bsym, "sym", None), "meta", None)
    for _ in range(8):
        inner, code = getattr(meta, "__wrapped__", None), getattr(meta, "__code__", None)
        if inner is None or code is None or (getattr(meta, "__globals__", {}).get("__name__"), code.co_qualname) \
                not in _PASS_THROUGH:
            break
        meta = inner
    code = getattr(meta, "__code__", None)
    if code is None:
        return None
    module = getattr(meta, "__globals__", {}).get("__name__", "?")
    return code.co_qualname, f"{module}.{code.co_qualname}"


def _reads(bsym: Any) -> set[str]:
    """The names of the proxies ``bsym`` reads, its own and those its subsymbols read."""
    return {p.name for p in proxy_args(bsym)}.union(*map(_reads, getattr(bsym, "subsymbols", ())))


def written(bsym: Any) -> set[str]:
    """The names of the proxies ``bsym`` writes into (the destination of each ``copy_`` in it: an in-place op)."""
    copy = getattr(bsym.sym, "id", None) == PrimIDs.COPY_ and len(bsym.args) > 1  # prims.copy_(src, dst)
    own = {bsym.args[1].name} if copy and isinstance(bsym.args[1], TensorProxy) else set()
    return own.union(*map(written, getattr(bsym, "subsymbols", ())))


def tensor_outs(bsym: Any) -> list[Any]:
    return [p for p in proxy_outs(bsym) if isinstance(p, TensorProxy)]


def needing_inputs(trace: Any) -> set[str]:
    """The names of the trace's inputs that require grad."""
    return {p.name for p in getattr(trace, "args", None) or () if isinstance(p, TensorProxy) and p.requires_grad}


def detached(bsym: Any) -> bool:
    """Whether a tensor output of ``bsym`` carries ``DETACHED_AUTOGRAD_GRAPH`` (the vjp treats it as a constant)."""
    tag = _detached_tag()
    return tag is not None and any(tag in getattr(p, "tags", ()) for p in tensor_outs(bsym))


def differentiable(bsym: Any, needing: set[str]) -> bool:
    """Whether autograd records ``bsym`` when grad is enabled: it reads a tensor needing grad, not through ``detach``."""
    return bsym.sym.id not in _CUTS and bool(_reads(bsym) & needing)


def recorded_by_autograd(bsym: Any, needing: set[str], enabled: bool | None) -> bool:
    """Whether eager autograd records ``bsym`` called in grad mode ``enabled``; ``needing`` (the names of the
    tensors needing grad) gains what it computes then, and what an in-place op of it wrote into."""
    outs = tensor_outs(bsym)
    needing.update(p.name for p in outs if getattr(p, "requires_grad", False) is True)
    if not enabled or not differentiable(bsym, needing):
        return False
    needing.update({p.name for p in outs} | written(bsym))  # what eager gives a grad_fn (the lost ones too)
    return True


def detached_under_grad(
    trace: Any, *, grad_enabled: bool, made_by: str = "", retagged: Mapping[tuple[int, Any], Retagging] | None = None
) -> list[Violation]:
    """Each top-level symbol of ``trace`` called with grad enabled (``grad_enabled``: the mode at the start of
    the trace) that reads a tensor needing grad and whose tensor output, not one of its own inputs, carries
    ``DETACHED_AUTOGRAD_GRAPH``; reads only. ``made_by``: the step that made the trace, for the message;
    ``retagged``: by (``id`` of the proxy, tag), the later step that added the tag to it (then that step made
    the problem, not the symbol's meta).

    A tensor needs grad if its proxy says so (an input, a parameter) or a symbol called with grad enabled
    computed it from one (the interpretation's proxies do not say it): a symbol that reads none has no gradient
    to lose, eager autograd gives its result none either (inputs that do not require grad, frozen weights)."""
    tag = _detached_tag()
    if tag is None:
        return []
    found: list[Violation] = []
    enabled: bool | None = grad_enabled
    made = f" in the trace made by {made_by}" if made_by else ""
    needing = needing_inputs(trace)
    for index, bsym in enumerate(trace.bound_symbols):
        if getattr(bsym.sym, "id", None) == MARKER:
            enabled = marker_mode(bsym)
            if enabled is None:
                return found  # a mode we cannot know: nothing after it is judged
            continue
        if not recorded_by_autograd(bsym, needing, enabled):
            continue
        inputs = {p.name for p in proxy_args(bsym)}
        for proxy in tensor_outs(bsym):
            if proxy.name in inputs or tag not in getattr(proxy, "tags", ()):
                continue
            where = bsym_label(index, bsym)
            retagging = (retagged or {}).get((id(proxy), tag))
            found.append(_detached(proxy, where, made, bsym, retagging))
    return found


def _detached(proxy: Any, where: str, made: str, bsym: Any, retagging: Retagging | None) -> Violation:
    """The violation of one detached output: charged to the step that added the tag when one did, else to the
    symbol's meta."""
    head = (f"{where}{made} is called with grad enabled, but its output {proxy.name} carries "
            "ProxyTag.DETACHED_AUTOGRAD_GRAPH")
    lost = (f"the gradient of {proxy.name} is lost, the forward/backward split will treat the symbol as a "
            "constant and give it no backward, so the program's result does not require grad through it")
    if retagging is not None:
        label, qualname = retagging.culprit
        mode = {True: " with grad enabled", False: " with grad disabled", None: ""}[retagging.grad_enabled]
        return Violation(
            "detached-under-grad", proxy.name,
            f"{head}, added after the symbol made it by {label} ({qualname}), which bound {proxy.name} as an input "
            f"of the {retagging.into} trace{mode}: the unpacking symbol it records returns its argument, the very "
            "proxy this trace defines, and Symbol.__call__ tags the outputs of a call made with grad disabled, so "
            f"one trace's binding changed another trace's value: {lost}",
            where, culprit=retagging.culprit,
            advice=f"{qualname} must not tag the proxies it is given, which other traces define: bind them with grad "
            "enabled, or leave untagged the outputs of a call that are its own arguments (Thunder's fix of #2479)",
        )
    definer = meta_definer(bsym)
    meta = f" (its meta, {definer[1]}, returned it tagged)" if definer else ""
    return Violation(
        "detached-under-grad", proxy.name,
        f"{head}{meta}, the tag of a value computed with grad disabled (a grad-disabled region inside the symbol, "
        f"such as a torch.no_grad() in its forward, left it there): {lost}",
        where, culprit=None if definer is None else (definer[0], definer[1]),
    )


def detached_across(
    traces: Iterable[Any], *, grad_enabled: bool, retagged: Mapping[tuple[int, Any], Retagging] | None = None
) -> list[tuple[Violation, Any]]:
    """:func:`detached_under_grad` of the interpretation's computation traces, in the order made (the one it
    first made, then the one it returns with the proxies renamed after the user's variables): each output once,
    charged to the first trace that has it, with the names it has in the later ones."""
    return across(traces, lambda trace: detached_under_grad(trace, grad_enabled=grad_enabled, retagged=retagged))


def across(traces: Iterable[Any], judge: Callable[[Any], list[Violation]]) -> list[tuple[Violation, Any]]:
    """What ``judge`` finds in each of the interpretation's computation traces, in the order made: each output once,
    charged to the first trace that has it, with the names it has in the later ones (the renaming maps the bound
    symbols and their outputs one to one, so an output keeps its symbol's index and its place)."""
    found: dict[tuple[str, int], tuple[Violation, Any]] = {}  # (where, place among its symbol's) -> first
    for trace in traces:
        places: dict[str, int] = {}
        for violation in judge(trace):
            place = places[violation.where] = places.get(violation.where, -1) + 1
            key = (violation.where, place)
            if key not in found:
                found[key] = (violation, trace)
                continue
            first, made_in = found[key]
            if violation.name != first.name and violation.name not in first.also:
                named = f"its output {first.name}"
                message = first.message.replace(named, f"{named} (named {violation.name} in a later trace of the step)", 1)
                found[key] = (dataclasses.replace(first, also=(*first.also, violation.name), message=message), made_in)
    return list(found.values())
