"""Thunder's VJP backward pass, watched for a cotangent whose dtype or shape is not its primal's.

``thunder.core.transforms.backward_pass(forward_env, trace, init_cotangents)`` is wrapped (it is looked up as a
module global by ``backward_fn`` of ``forward_and_backward_from_trace``, by ``vjp_call`` and by
``decomposed_fn_backward_rule``, which runs it again over a symbol's decomposition). The wrapper compares the
cotangents it is handed with the trace's outputs before it runs, and the gradients it returns with the trace's
inputs after (``traces.gradients``), and reports each mismatch before the next grad rule reads it. A
decomposition's inputs are new proxies (``a``); ``decomposed_fn_backward_rule`` is wrapped too, to say which
value of the enclosing trace each one is (``t2``). The same arguments go through, the same value comes back,
an exception is never touched, and nothing is created or named. The grad transform ``thunder.jit`` runs
(``augmented_forward_pass``) never calls ``backward_pass``: there a grad rule associates each gradient with its
primal through ``prims.put_grad``, whose meta is wrapped while installed (``hook_put_grad``: the one symbol
every rule's ``put_grad`` goes through, whatever module bound it). A gradient that meta is sure to reject (another
shape, or another kind of dtype, for a float primal) is reported first, with the primal, the gradient and the
rule that put it, and the meta then runs as before::

    >>> from safe_tracectx.hooks.gradients import watch_backward_pass
    >>> def backward_pass(forward_env, trace, init_cotangents):
    ...     return ()
    >>> watch_backward_pass(backward_pass).__wrapped__ is backward_pass
    True
"""

from __future__ import annotations

import contextvars
import dataclasses
import functools
import sys
from collections.abc import Callable
from types import FrameType
from typing import Any, Final

from safe_tracectx._support import events
from safe_tracectx._support.callsite import find_call_site
from safe_tracectx._support.labels import describe_trace
from safe_tracectx.errors import TraceContextError
from safe_tracectx.hooks.reporting import internal_error, report_all, switched_off
from safe_tracectx.traces.gradients import KIND, grad_rules, is_inexact, mismatch, mismatches, pairs
from safe_tracectx.traces.swaps import on_cpu
from safe_tracectx.traces.violations import Violation

__all__ = ["hook_put_grad", "unhook_put_grad", "watch_backward_pass", "watch_decomposed_rule"]

_PASS: Final = ("VJP backward pass", "thunder.core.transforms.backward_pass")


@dataclasses.dataclass
class _Frame:
    """One running ``backward_pass``: its trace, what its inputs are in the enclosing trace, the caller's frame,
    and the gradients already reported (shared down the chain: one report per bad gradient)."""

    trace: Any
    outer: dict[int, Any]
    parent: _Frame | None
    reported: list[Any]
    #: The cotangents the user handed the outermost backward pass (theirs to choose: never a rule's mistake).
    given: tuple[Any, ...] = ()


#: The running backward pass of this context; the primals a decomposed rule hands the next one it starts.
_FRAME: Final[contextvars.ContextVar[_Frame | None]] = contextvars.ContextVar("safe_tracectx_vjp", default=None)
_PRIMALS: Final[contextvars.ContextVar[Any]] = contextvars.ContextVar("safe_tracectx_vjp_primals", default=None)


def _active() -> bool:
    return events.naming_hooked.on and not switched_off(KIND)


def watch_decomposed_rule(original: Callable[..., Any]) -> Callable[..., Any]:
    """``decomposed_fn_backward_rule``: the backward pass it starts is told the primals it was given."""

    @functools.wraps(original)
    def decomposed_fn_backward_rule(decomposed_fn: Any, args: Any, *rest: Any, **kwargs: Any) -> Any:
        token = _PRIMALS.set(args)
        try:
            return original(decomposed_fn, args, *rest, **kwargs)
        finally:
            _PRIMALS.reset(token)

    return decomposed_fn_backward_rule


def watch_backward_pass(original: Callable[..., Any]) -> Callable[..., Any]:
    """``backward_pass``, its cotangents checked against the trace's outputs and its gradients against its inputs."""

    @functools.wraps(original)
    def backward_pass(forward_env: Any, trace: Any, init_cotangents: Any, *args: Any, **kwargs: Any) -> Any:
        if not _active():
            return original(forward_env, trace, init_cotangents, *args, **kwargs)
        frame_token = primals_token = None
        try:
            frame = _enter(trace, init_cotangents)
            frame_token, primals_token = _FRAME.set(frame), _PRIMALS.set(None)
            if frame.parent is not None:  # a decomposition's cotangents come from a grad rule, the top's from the user
                _check(frame, _read_cotangents(*_outputs(trace, init_cotangents), frame.given), "is handed", "cotangent", "output")
        except TraceContextError:
            _leave(frame_token, primals_token)
            raise
        except Exception as bug:  # noqa: BLE001 - a bug of ours never stops the user's program
            internal_error(f"the cotangents handed to backward_pass over {trace!r}", bug)
        try:
            result = original(forward_env, trace, init_cotangents, *args, **kwargs)
            if frame_token is not None:
                try:
                    _check(_FRAME.get(), (tuple(getattr(trace, "args", ())), result), "returns", "gradient", "input")
                except TraceContextError:
                    raise
                except Exception as bug:  # noqa: BLE001
                    internal_error(f"the gradients backward_pass returned over {trace!r}", bug)
            return result
        finally:
            _leave(frame_token, primals_token)

    return backward_pass


def _enter(trace: Any, init_cotangents: Any) -> _Frame:
    parent, given = _FRAME.get(), _PRIMALS.get()
    outer: dict[int, Any] = {}
    if parent is not None and given is not None:  # a decomposition: its inputs are the symbol's arguments
        outer = {id(inner): value for inner, value in pairs(tuple(getattr(trace, "args", ())), tuple(given))
                 if inner is not None}
    reported = parent.reported if parent is not None else []
    given_by_user = parent.given if parent is not None else tuple(c for _, c in pairs(init_cotangents, init_cotangents))
    return _Frame(trace, outer, parent if outer else None, reported, given_by_user)


def _leave(frame_token: Any, primals_token: Any) -> None:
    if primals_token is not None:
        _PRIMALS.reset(primals_token)
    if frame_token is not None:
        _FRAME.reset(frame_token)


def _outputs(trace: Any, init_cotangents: Any) -> tuple[Any, Any]:
    """(the trace's outputs, the cotangents) lined up as backward_pass lines them up (one output, one cotangent)."""
    output = getattr(trace, "output", None)
    if isinstance(init_cotangents, tuple | list) and len(init_cotangents) == 1 and not isinstance(output, tuple | list):
        return (output,), tuple(init_cotangents)
    return output, init_cotangents


def _read_cotangents(outputs: Any, cotangents: Any, given: tuple[Any, ...]) -> tuple[list[Any], list[Any]]:
    """The (output, cotangent) pairs to compare: not an integer or bool output's (Thunder takes it for a constant
    of the VJP and never reads its cotangent), nor one the user handed in (``given``: torch too takes an int
    cotangent for a float output)."""
    found = [(o, c) for o, c in pairs(outputs, cotangents) if is_inexact(o) and not any(c is g for g in given)]
    return [o for o, _ in found], [c for _, c in found]


def _enclosing(frame: _Frame, primal: Any) -> list[Any]:
    """``primal`` and what it is in each enclosing trace, innermost first (``a``, then ``t2``)."""
    found = [primal]
    while frame.parent is not None and id(found[-1]) in frame.outer:
        found.append(frame.outer[id(found[-1])])
        frame = frame.parent
    return found


def _check(frame: _Frame | None, lined_up: tuple[Any, Any], verb: str, what: str, side: str) -> None:
    if frame is None:
        return
    errors = []
    for primal, value, why in mismatches(*lined_up):
        if any(value is seen for seen in frame.reported):
            continue
        frame.reported.append(value)
        errors.append(_error(frame, primal, value, why, verb, what, side))
    if errors:
        report_all(errors)


def _error(frame: _Frame, primal: Any, value: Any, why: str, verb: str, what: str, side: str) -> TraceContextError:
    import thunder.core.transforms as transforms

    chain = _enclosing(frame, primal)
    names = [getattr(p, "name", "?") for p in chain]
    shown = names[-1] + (f" ({', '.join(names[:-1])} in the decomposition)" if len(names) > 1 else "")
    rules = grad_rules(frame.trace, primal, transforms.backward_impls, getattr(transforms, "_grad_fn_map", {}))
    if what == "gradient":
        source = (f"; it comes from {' or '.join(label for label, _ in rules)}" if rules else "")
    else:
        source = ": a grad rule run before handed it on"
    violation = Violation(
        KIND, getattr(value, "name", "?"),
        f"backward_pass {verb} the {what} {getattr(value, 'name', '?')} for the {side} {shown} with {why}{source}; "
        "a gradient must have its primal's dtype and shape, so the grad rules that read it next fail or compute "
        "something else",
        f"Thunder's VJP backward pass over {describe_trace(frame.trace)}",
        also=tuple(dict.fromkeys(reversed(names))),
        culprit=rules[0] if rules else _PASS,
    )
    return violation.to_error(find_call_site())


#: (the put_grad symbol, its meta, ours) while hooked.
_put_grad_metas: Final[list[tuple[Any, Any, Any]]] = []
#: Frames between the meta and the rule that called ``put_grad``: the symbol's call, a language context.
_PLUMBING: Final = ("/thunder/core/symbol.py", "/thunder/core/langctxs.py")
_MAX_FRAMES: Final = 8


def _rule_frame(frame: FrameType | None) -> FrameType | None:
    """The frame of the function that put the gradient: past the symbol's plumbing and ``put_grads``-like helpers."""
    for _ in range(_MAX_FRAMES):
        if frame is None:
            return None
        code = frame.f_code
        if not code.co_filename.replace("\\", "/").endswith(_PLUMBING) and not code.co_name.startswith("put_grad"):
            return frame
        frame = frame.f_back
    return None


def _rejected(grad_for: Any, grad: Any) -> str | None:
    """How ``grad`` is not ``grad_for``'s gradient where ``prims.put_grad``'s meta is sure to raise, or None: it
    ignores an integer or bool primal's gradient, and leaves a CPU scalar tensor's shape alone."""
    if not is_inexact(grad_for) or getattr(grad, "_shape", None) == () and on_cpu(grad):
        return None
    return mismatch(grad_for, grad)


def _put_grad_error(grad_for: Any, grad: Any, why: str, frame: FrameType | None) -> TraceContextError:
    from thunder.core.trace import get_tracectx

    rule = _rule_frame(frame)
    if rule is not None:
        qualname = getattr(rule.f_code, "co_qualname", rule.f_code.co_name)
        culprit = (f"the grad rule {qualname}", f"{rule.f_globals.get('__name__', '?')}.{qualname}")
        source = f"; the grad rule {qualname} put it"
    else:
        culprit, source = ("prims.put_grad", "thunder.core.prims.put_grad"), ""
    primal, gradient = getattr(grad_for, "name", "?"), getattr(grad, "name", "?")
    violation = Violation(
        KIND, gradient,
        f"prims.put_grad is given the gradient {gradient} for {primal} with {why}{source}; a gradient must have "
        "its primal's dtype and shape, and Thunder's put_grad rejects this one",
        f"the grad rule's trace {describe_trace(get_tracectx())}",
        also=(primal,),
        culprit=culprit,
    )
    return violation.to_error(find_call_site())


def _make_put_grad_meta(original: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(original)
    def put_grad_meta(grad_for: Any, grad: Any, *args: Any, **kwargs: Any) -> Any:
        if _active():
            try:
                why = _rejected(grad_for, grad)
                error = None if why is None else _put_grad_error(grad_for, grad, why, sys._getframe(1))
            except Exception as bug:  # noqa: BLE001 - a bug of ours never stops the user's program
                internal_error("a gradient put by prims.put_grad", bug)
                error = None
            if error is not None:
                report_all([error])  # strict raises here, before Thunder's meta does
        return original(grad_for, grad, *args, **kwargs)

    return put_grad_meta


def hook_put_grad() -> None:
    """Wrap ``prims.put_grad``'s meta (once: a second call changes nothing). The symbol is frozen, so the field is
    set as its own ``__init__`` sets it; its hash and equality read its id, never its meta."""
    import thunder.core.prims as prims

    symbol = getattr(prims, "put_grad", None)
    meta = getattr(symbol, "meta", None)
    if _put_grad_metas or meta is None:
        return
    ours = _make_put_grad_meta(meta)
    object.__setattr__(symbol, "meta", ours)
    _put_grad_metas.append((symbol, meta, ours))


def unhook_put_grad() -> None:
    """Put the original meta back, unless someone replaced ours meanwhile (theirs is left in place)."""
    while _put_grad_metas:
        symbol, meta, ours = _put_grad_metas.pop()
        if getattr(symbol, "meta", None) is ours:
            object.__setattr__(symbol, "meta", meta)

