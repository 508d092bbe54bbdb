"""Where a gradient flows in a trace, by Thunder's semantics: what each symbol's decomposition reads, which
top-level symbols the forward/backward split differentiates, and what reaches the returned output.

Reads only; shared by the checks that compare the trace with what eager PyTorch would differentiate
(``grad-mode-unrecorded``, ``gradient-dropped``)::

    >>> import torch, thunder
    >>> jitted = thunder.jit(lambda x, y: (x * 2, y.detach()))
    >>> _ = jitted(torch.ones(2, requires_grad=True), torch.ones(2, requires_grad=True))
    >>> trace = thunder.last_traces(jitted)[0]
    >>> sorted(returned_reach(trace, differentiated(trace, grad_enabled=True), storages(trace)))  # not y
    ['t0', 't1', 'x']
"""

from __future__ import annotations

from safe_tracectx._support.extras import require_thunder

require_thunder("safe_tracectx.traces.gradient_flow")

from collections.abc import Callable, Mapping, Sequence
from typing import Any, Final

from thunder.core import dtypes
from thunder.core.prims import PrimIDs
from thunder.core.proxies import TensorProxy

from safe_tracectx.traces.bound_proxies import proxy_args
from safe_tracectx.traces.grad_mode import MARKER, detached, marker_mode, tensor_outs, written
from safe_tracectx.traces.returns import returned

__all__ = [
    "differentiated", "floating", "gradient_reads", "gradient_walk", "own_backward", "returned_reach",
    "storages", "thunder_modes",
]

#: ``prims.update_aliases`` (Thunder >= 0.2.4): its grad rule gives each output's gradient to the input at its place.
_UPDATE_ALIASES: Final = getattr(PrimIDs, "UPDATE_ALIASES", None)
#: What a gradient does not flow through: ``detach``, and the prims whose gradient is zero.
_CUT: Final = "torch.detach"
_ZERO_GRADIENT: Final = frozenset({PrimIDs.SIGN, PrimIDs.FLOOR, PrimIDs.CEIL, PrimIDs.ROUND, PrimIDs.TRUNC})
#: Dynamo's higher-order op for a custom ``autograd.Function`` (its backward is the program's).
_HIGHER_ORDER_FUNCTION: Final = "torch.ops.higher_order.autograd_function_apply"


def gradient_reads(bsym: Any, *, by_tags: bool = True) -> set[str]:
    """The floating tensors a gradient of ``bsym``'s outputs flows to, by its decomposition followed back from its
    outputs as the split follows a trace: through the subsymbols it differentiates (not ``detach``, a prim whose
    gradient is zero, a region the decomposition records with grad disabled, a custom ``autograd.Function`` or
    custom op inside a higher-order symbol), floating tensors only; the destination of a ``copy_`` is overwritten,
    only its source is read. A tensor read only for its dtype, device or shape (``torch.arange(n).to(x)``,
    ``x.new_zeros(...)``, ``zeros_like``) is read by no subsymbol. ``by_tags``: a subsymbol whose outputs Thunder
    tagged as computed with grad disabled is not followed (Thunder's view; eager's, whose mode may differ, is
    without)."""
    if bsym.sym.id == _CUT or bsym.sym.id in _ZERO_GRADIENT or str(bsym.sym.id).rpartition(".")[2].startswith("new_"):
        return set()  # detach, a zero gradient, x.new_zeros(...) and the like (x gives only dtype and device)
    subsymbols = getattr(bsym, "subsymbols", ())
    if not subsymbols:
        if bsym.sym.id == PrimIDs.COPY_ and bsym.args:
            return {bsym.args[0].name} if floating(bsym.args[0]) else set()  # copy_(source, destination)
        return {p.name for p in proxy_args(bsym) if floating(p)}
    outs = {p.name for p in tensor_outs(bsym) if floating(p)}
    reach, reads = outs | written(bsym), set[str]()
    followed = differentiated(bsym, grad_enabled=True, nested=True, by_tags=by_tags)
    for sub, follow in zip(reversed(subsymbols), reversed(followed)):
        made = {p.name for p in tensor_outs(sub) if floating(p)} | written(sub)
        if follow and made & reach:
            read = gradient_reads(sub, by_tags=by_tags)
            reach, reads = (reach - (written(sub) - read)) | read, reads | read
    return reads - outs


def own_backward(bsym: Any) -> bool:
    """Whether ``bsym``'s backward is the program's own, not Thunder's: a custom ``autograd.Function`` or custom op,
    which ``thunder.jit`` registers as a symbol of an executor (its grad rule the program's backward)."""
    return getattr(bsym.sym, "executor", None) is not None or bsym.sym.id == _HIGHER_ORDER_FUNCTION


def storages(trace: Any) -> dict[str, str]:
    """Each output of an in-place symbol -> the tensor it updated, followed to the first (``x.mul_(a).add_(b)``
    updates ``x`` twice): the name that holds the storage."""
    root: dict[str, str] = {}
    for bsym in trace.bound_symbols:
        into = sorted(written(bsym))
        if into:
            for proxy in tensor_outs(bsym):
                root.setdefault(proxy.name, root.get(into[0], into[0]))
    return root


def thunder_modes(trace: Any, grad_enabled: bool) -> list[bool | None]:
    """The grad mode each top-level symbol of ``trace`` is called in by its markers (a marker: its own mode; None
    after a marker whose mode cannot be followed)."""
    return _modes(trace.bound_symbols, grad_enabled)


def _modes(bsyms: Sequence[Any], grad_enabled: bool) -> list[bool | None]:
    modes: list[bool | None] = []
    mode: bool | None = grad_enabled
    for bsym in bsyms:
        if mode is not None and getattr(bsym.sym, "id", None) == MARKER:
            mode = marker_mode(bsym)
        modes.append(mode)
    return modes


def differentiated(
    trace: Any, *, grad_enabled: bool, modes: Sequence[bool | None] | None = None, nested: bool = False,
    by_tags: bool = True,
) -> list[bool]:
    """Per top-level symbol of ``trace`` (per subsymbol of a bound symbol, ``nested``), whether the
    forward/backward split differentiates it: called with grad enabled by the trace's markers (``modes``, else
    :func:`thunder_modes`), not a marker, its outputs not tagged ``DETACHED_AUTOGRAD_GRAPH`` (unless not
    ``by_tags``); ``nested``, not a symbol whose backward is the program's either (inside a higher-order symbol,
    its rule is not judged)."""
    bsyms = trace.subsymbols if nested else trace.bound_symbols
    modes = _modes(bsyms, grad_enabled) if modes is None else modes
    return [mode is True and getattr(b.sym, "id", None) != MARKER and not (by_tags and detached(b))
            and not (nested and own_backward(b)) for mode, b in zip(modes, bsyms)]


def returned_reach(
    trace: Any, differentiated: Sequence[bool], root: Mapping[str, str], *, through_own_backwards: bool = True,
    from_inputs: bool = True,
) -> set[str]:
    """The storages (:func:`storages`) of the floating tensors a gradient can flow through to what ``trace``
    returns to the caller (its output, not the inputs it hands back for their in-place updates), through the
    symbols Thunder differentiates (``differentiated``, by index) and what they wrote into in place; not through
    a symbol whose backward is the program's own unless ``through_own_backwards``; not from an input the trace
    returns as it is unless ``from_inputs`` (autograd connects that output to the input itself, not through the
    backward)."""
    return gradient_walk(trace, differentiated, root, through_own_backwards=through_own_backwards,
                         from_inputs=from_inputs)[0]


def gradient_walk(
    trace: Any, differentiated: Sequence[bool], root: Mapping[str, str], *, through_own_backwards: bool = True,
    from_inputs: bool = True,
) -> tuple[set[str], list[int]]:
    """(:func:`returned_reach`, the indices of the top-level symbols the gradient flows back through, in program
    order)."""
    bsyms = trace.bound_symbols
    flat = returned(trace)
    if flat is None:  # not a whole program: all of it
        return {root.get(p.name, p.name) for b in bsyms for p in tensor_outs(b)}, list(range(len(bsyms)))
    args = () if from_inputs else getattr(trace, "args", None) or ()
    inputs = {p.name for p in args if isinstance(p, TensorProxy)}
    reach = {root.get(p.name, p.name) for p in flat if floating(p) and p.name not in inputs}
    through: list[int] = []
    for index in range(len(bsyms) - 2, -1, -1):
        bsym = bsyms[index]
        if not differentiated[index] or not (through_own_backwards or not own_backward(bsym)):
            continue
        made = {root.get(n, n) for n in (*(p.name for p in tensor_outs(bsym)), *written(bsym))}
        if made & reach:
            reads = {root.get(n, n) for n in _reads_of_reached(bsym, lambda name: root.get(name, name) in reach)}
            # A storage overwritten without being read (copy_, zero_) is not reached in its earlier versions.
            reach = (reach - ({root.get(n, n) for n in written(bsym)} - reads)) | reads
            through.append(index)
    return reach, through[::-1]


def _reads_of_reached(bsym: Any, reached: Callable[[str], bool]) -> set[str]:
    """What a gradient of ``bsym``'s reached outputs flows to: :func:`gradient_reads`, but for ``update_aliases``
    only the inputs at the places of its reached outputs (an alias grouped with a detached tensor is not read
    through it)."""
    if _UPDATE_ALIASES is None or bsym.sym.id != _UPDATE_ALIASES or not bsym.args:
        return gradient_reads(bsym)
    return {p.name for p, out in handed_on(bsym) if reached(out.name) and floating(p)}


def handed_on(bsym: Any) -> list[tuple[Any, Any]]:
    """(input, output) of an ``update_aliases`` (or any symbol whose outputs stand for its first argument's items),
    place by place: each tensor input and the output that hands it on, skipping an output dead-code elimination
    dropped (None: ``(_, t11) = update_aliases((t9, t8))``)."""
    given = bsym.args[0] if bsym.args and isinstance(bsym.args[0], tuple | list) else ()
    outs = bsym.output if isinstance(bsym.output, tuple | list) else ()
    return [(p, out) for p, out in zip(given, outs) if isinstance(p, TensorProxy) and isinstance(out, TensorProxy)]


def floating(proxy: Any) -> bool:
    """A tensor a gradient can flow through (not bool or integer)."""
    dtype = getattr(proxy, "dtype", None)
    return isinstance(proxy, TensorProxy) and (dtypes.is_float_dtype(dtype) or dtypes.is_complex_dtype(dtype))
