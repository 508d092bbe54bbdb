"""A grad-mode change the program asked for that the trace does not record (``grad-mode-unrecorded``).

``torch.no_grad()`` and the like end in ``torch._C._set_grad_enabled``; by Thunder's
semantics each call made while a function is interpreted records a ``set_grad_enabled``
marker in the computation trace, from which the forward/backward split learns which symbols
were computed with grad disabled (and treats them as constants). A change that leaves no
marker is lost: the split differentiates what eager PyTorch computed without autograd (or
the reverse), so the program computes other gradients and outputs that require grad where
eager's do not. Before Thunder's fix of #1282 its ``torch._C._set_grad_enabled`` only
warned, and the ThunderFX splitter handed it the ``no_grad`` regions of Dynamo's graphs;
on 0.2.6 and main ``torch.inference_mode()`` inside a jitted function records nothing (Thunder
has no lookaside for it), so Thunder differentiates what eager computes as inference tensors.

The changes asked for (``hooks.grad_mode_requests``) are followed as eager PyTorch would
follow them, the markers as Thunder does; a tensor output computed where the two differ,
from a tensor needing grad, is reported when Thunder keeps it (dead code is not)::

    >>> from thunder.core.trace import TraceCtx
    >>> blame = lambda request: (("Thunder's torch._C._set_grad_enabled", "thunder.torch.f"), "", None)
    >>> unrecorded_changes(TraceCtx(), [Request(0, False, recorded=False)], grad_enabled=True, blame=blame)
    []
"""

from __future__ import annotations

from safe_tracectx._support.extras import require_thunder

require_thunder("safe_tracectx.traces.unrecorded_grad_mode")

from collections.abc import Callable, Mapping, Sequence
from typing import Any, Final, NamedTuple

from thunder.core import dtypes
from thunder.core.prims import PrimIDs
from thunder.core.proxies import TensorProxy
from thunder.core.pytree import tree_flatten

from safe_tracectx.traces.bound_proxies import proxy_args
from safe_tracectx.traces.grad_mode import MARKER, detached, marker_mode, needing_inputs, tensor_outs, written
from safe_tracectx.traces.program import Program
from safe_tracectx.traces.violations import Violation, bsym_label

__all__ = ["Blame", "Request", "unrecorded_changes"]

_RETURN: Final = PrimIDs.RETURN
#: What a gradient does not flow through: ``detach``, and the prims whose gradient is zero.
_CUT: Final = "torch.detach"
_ZERO_GRADIENT: Final = frozenset({PrimIDs.SIGN, PrimIDs.FLOOR, PrimIDs.CEIL, PrimIDs.ROUND, PrimIDs.TRUNC})


class Request(NamedTuple):
    """A grad-mode change the program asked for at the top level of a trace while Thunder interpreted it."""

    #: The index among the trace's top-level bound symbols of the first the change applies to.
    position: int
    #: The mode asked for (anything but a plain bool: the mode cannot be followed past it).
    enabled: object
    #: Whether Thunder recorded a ``set_grad_enabled`` marker for it.
    recorded: bool
    #: ``file:line`` of the program's code that asked, if known.
    line: str | None = None
    #: What the program called (None: ``torch._C._set_grad_enabled(enabled)``).
    call: str | None = None


#: Who is charged for a request the trace does not record, why it records none, and the fix if not the kind's:
#: ((label, qualname), reason, advice or None).
Blame = Callable[[Request], tuple[tuple[str, str], str, str | None]]


def _asked(request: Request) -> str:
    where = f" at {request.line}" if request.line else ""
    return f"{request.call or f'torch._C._set_grad_enabled({request.enabled!r})'}{where}"


def _gradient_reads(bsym: Any) -> set[str]:
    """The floating tensors a gradient of ``bsym``'s outputs flows to: what its decomposition reads (a prim's own
    arguments), not through ``detach`` or a prim whose gradient is zero. A tensor read only for its dtype, device or
    shape (``torch.arange(n).to(x)``, ``x.new_zeros(...)``, ``zeros_like``) is read by no subsymbol."""
    if bsym.sym.id == _CUT or bsym.sym.id in _ZERO_GRADIENT or str(bsym.sym.id).rpartition(".")[2].startswith("new_"):
        return set()  # detach, a zero gradient, x.new_zeros(...) and the like (x gives only dtype and device)
    subsymbols = getattr(bsym, "subsymbols", ())
    if subsymbols:
        return set().union(*map(_gradient_reads, subsymbols))
    return {p.name for p in proxy_args(bsym) if _floating(p)}


def _storages(trace: Any) -> dict[str, str]:
    """Each output of an in-place symbol -> the tensor it updated, followed to the first (``x.mul_(a).add_(b)``
    updates ``x`` twice): the name that holds the storage."""
    root: dict[str, str] = {}
    for bsym in trace.bound_symbols:
        into = sorted(written(bsym))
        if into:
            for proxy in tensor_outs(bsym):
                root.setdefault(proxy.name, root.get(into[0], into[0]))
    return root


def _returned_reach(trace: Any, differentiated: Sequence[bool], root: Mapping[str, str]) -> set[str]:
    """The storages (:func:`_storages`) of the floating tensors a gradient can flow through to what ``trace``
    returns to the caller (its output, not the inputs it hands back for their in-place updates), through the
    symbols Thunder differentiates (``differentiated``, by index) and what they wrote into in place."""
    bsyms = trace.bound_symbols
    if not bsyms or getattr(bsyms[-1].sym, "id", None) != _RETURN:
        return {root.get(p.name, p.name) for b in bsyms for p in tensor_outs(b)}  # not a whole program: all of it
    value = bsyms[-1].args[0] if bsyms[-1].args else None
    if isinstance(value, dict) and "output" in value:
        value = value["output"]
    flat, _ = tree_flatten(value)  # type: ignore[no-untyped-call]
    reach = {root.get(p.name, p.name) for p in flat if _floating(p)}
    for index in range(len(bsyms) - 2, -1, -1):
        bsym = bsyms[index]
        made = {root.get(n, n) for n in (*(p.name for p in tensor_outs(bsym)), *written(bsym))}
        if differentiated[index] and made & reach:
            reach |= {root.get(n, n) for n in _gradient_reads(bsym)}
    return reach


def _floating(proxy: Any) -> bool:
    """A tensor a gradient can flow through (not bool or integer)."""
    dtype = getattr(proxy, "dtype", None)
    return isinstance(proxy, TensorProxy) and (dtypes.is_float_dtype(dtype) or dtypes.is_complex_dtype(dtype))


def _thunder_modes(trace: Any, grad_enabled: bool) -> list[bool | None]:
    """The grad mode each top-level symbol of ``trace`` is called in by its markers (a marker: its own mode; None
    after a marker whose mode cannot be followed)."""
    modes: list[bool | None] = []
    mode: bool | None = grad_enabled
    for bsym in trace.bound_symbols:
        if mode is not None and getattr(bsym.sym, "id", None) == MARKER:
            mode = marker_mode(bsym)
        modes.append(mode)
    return modes


def unrecorded_changes(
    trace: Any, requests: Sequence[Request], *, grad_enabled: bool, blame: Blame,
    inference: Mapping[int, Request] | None = None,
) -> list[Violation]:
    """Each floating tensor output of a top-level symbol of ``trace``, through which a gradient can reach what the
    trace returns, that reads a tensor needing grad and is computed in another grad mode by eager's reading of the
    program than by the trace's markers; reads only. Both start at ``grad_enabled`` (the jit call's mode); eager's
    follows ``requests`` and ``inference`` (the indices of the symbols called in inference mode: grad disabled,
    and the mode at its entry again after it); the trace's follows its markers.

    Inside a jitted function ``torch.is_grad_enabled()`` reads PyTorch's mode, which Thunder leaves at the start
    mode (disabled in inference mode), so a request made while eager's mode is another may carry a value eager
    would not (``no_grad``'s exit restores what its entry read): one that sets the start mode is taken (a misread
    one leaves eager's mode as Thunder's, so nothing is reported for it), any other ends the judgement.
    ``blame`` says who is charged for a change and why it left no marker."""
    inference = inference or {}
    if not inference and all(request.recorded for request in requests):
        return []
    bsyms = trace.bound_symbols
    modes = _thunder_modes(trace, grad_enabled)
    differentiated = [mode is True and getattr(b.sym, "id", None) != MARKER and not detached(b)
                      for mode, b in zip(modes, bsyms)]
    root = _storages(trace)
    dead, reach = Program(trace).dead_indices(), _returned_reach(trace, differentiated, root)
    needing, needing_thunder = needing_inputs(trace), needing_inputs(trace)
    program = grad_enabled  # eager's mode outside inference mode
    pending, lost, entered = list(requests), None, None
    found: list[Violation] = []
    for index, bsym in enumerate(bsyms):
        region = inference.get(index)
        if region is not None and entered is None:
            entered, lost = program, region  # the mode inference mode's exit restores
        elif region is None and entered is not None:
            program, entered = entered, None
        while pending and pending[0].position <= index:
            request = pending.pop(0)
            real = grad_enabled and entered is None  # what torch.is_grad_enabled() reads while Thunder traces
            eager = program and entered is None
            if type(request.enabled) is not bool or (eager != real and request.enabled != grad_enabled):
                return found  # a mode eager may not have: nothing after it is judged
            program = request.enabled
            lost = lost if request.recorded else request
        if modes[index] is None:
            return found  # a marker whose mode cannot be followed
        if getattr(bsym.sym, "id", None) == MARKER:
            continue
        reads = _gradient_reads(bsym)
        outs = {p.name for p in tensor_outs(bsym)} | written(bsym)
        by_thunder = differentiated[index] and bool(reads & needing_thunder)
        by_eager = program and entered is None and bool(reads & needing)
        needing.update(outs if by_eager else ())
        needing_thunder.update(outs if by_thunder else ())
        if lost is None or by_thunder == by_eager or index in dead:
            continue
        inputs = {p.name for p in proxy_args(bsym)}
        after = region is None and lost.call is not None  # past the inference-mode region it is blamed on
        for name in dict.fromkeys([*(p.name for p in tensor_outs(bsym)), *sorted(written(bsym))]):
            if root.get(name, name) in reach and name not in inputs:
                found.append(_unrecorded(name, bsym_label(index, bsym), lost, by_eager, after, *blame(lost)))
    return found


def _unrecorded(
    name: str, where: str, lost: Request, by_eager: bool, after: bool, culprit: tuple[str, str], because: str,
    advice: str | None,
) -> Violation:
    if by_eager:
        mode, effect = "enabled", (
            f"the forward/backward split treats it as computed with grad disabled: {name} gets no gradient where "
            "eager PyTorch gives it one")
    else:
        mode, effect = "disabled", (
            f"the forward/backward split differentiates it as if grad were enabled: {name} requires grad and what "
            "it reads gets a gradient through it, which eager PyTorch does not give")
    return Violation(
        "grad-mode-unrecorded", name,
        f"{where} computes {name} where the program has grad {mode} ({'after ' if after else ''}{_asked(lost)}), "
        f"but the trace's grad mode there is not the program's ({because}): {effect}, so the program computes "
        "something else",
        where, culprit=culprit, advice=advice,
    )
