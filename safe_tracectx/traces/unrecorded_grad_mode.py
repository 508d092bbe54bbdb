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
from typing import Any, NamedTuple

from safe_tracectx.traces.bound_proxies import proxy_args
from safe_tracectx.traces.grad_mode import MARKER, needing_inputs, tensor_outs, written
from safe_tracectx.traces.gradient_flow import differentiated, gradient_reads, returned_reach, storages, thunder_modes
from safe_tracectx.traces.program import Program
from safe_tracectx.traces.violations import Violation, bsym_label

__all__ = ["Blame", "Request", "unrecorded_changes"]


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
    modes = thunder_modes(trace, grad_enabled)
    by_split = differentiated(trace, grad_enabled=grad_enabled, modes=modes)
    root = storages(trace)
    dead, reach = Program(trace).dead_indices(), returned_reach(trace, by_split, root)
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
        reads = gradient_reads(bsym, by_tags=False)  # eager's reading: the tags are Thunder's view of the mode
        outs = {p.name for p in tensor_outs(bsym)} | written(bsym)
        by_thunder = by_split[index] and bool(reads & needing_thunder)
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
