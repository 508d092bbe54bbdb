"""Each call of a backward Thunder compiled: the saved values it is handed are still all there.

A backward empties the saved-for-backward collections it unpacks
(``clear_mutable_collection(C1)``). That frees memory when each call is handed
fresh collections; when the forward's own list is handed over again, a second
backward over the same graph (``retain_graph=True``, which torch allows)
unpacks an empty collection and fails with ``ValueError: not enough values to
unpack`` (Thunder #2279). Which of the two happens is a fact of the run, so the
function Thunder compiled from such a backward trace is checked at each call,
before it runs: one ``len`` per emptied collection. A backward that empties
nothing is returned as it is::

    >>> from safe_tracectx.hooks.backward_calls import guard_backward
    >>> def backward_fn(saved_for_backward, cotangents):
    ...     return cotangents
    >>> guard_backward(backward_fn, [], {}) is backward_fn
    True
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Final

from safe_tracectx._support import events
from safe_tracectx._support.callsite import find_call_site
from safe_tracectx.hooks import compilation as compilations
from safe_tracectx.hooks.reporting import internal_error, report_all, switched_off
from safe_tracectx.traces.handover import EmptiedPart, emptied_by_backward, saved_part
from safe_tracectx.traces.violations import Violation

__all__ = ["guard_backward", "guarded_backward"]

_KIND: Final = "handover-emptied"


def guarded_backward(compilation: compilations.Compilation, trace: Any, function: Any) -> Any:
    """``function``, compiled from ``trace``; if ``trace`` is a backward that empties what it unpacks, a function
    that first checks, at each call, that those collections are as full as the backward unpacks them."""
    if function is None or not callable(function) or not compilations.is_backward(trace) or switched_off(_KIND):
        return function
    try:
        parts = emptied_by_backward(trace)
        if not parts:
            return function
        culprits = {part.position: _culprit(compilation, trace, part.position) for part in parts}
    except Exception as error:  # noqa: BLE001 - a bug of ours never stops the user's program
        internal_error(f"the saved values of {trace!r}", error)
        return function
    return guard_backward(function, parts, culprits)


def guard_backward(
    function: Callable[..., Any], parts: Sequence[EmptiedPart], culprits: Mapping[int, tuple[str, str]]
) -> Any:
    """``function`` (a compiled backward), checking before each call that each of ``parts`` of its
    ``saved_for_backward`` still holds the values it unpacks; an emptied one is reported before the call fails,
    charged to its culprit (``culprits``: (label, qualname) by position). Checked only while safe-tracectx is
    installed."""
    if not parts:
        return function
    expected = tuple((part.position, len(part.names)) for part in parts)

    @functools.wraps(function)
    def backward_fn(saved_for_backward: Any, *args: Any, **kwargs: Any) -> Any:
        # It stays in Thunder's compile cache after uninstall(): with the hooks gone, Thunder's backward runs as is.
        if events.naming_hooked.on:
            try:
                emptied = [part for part, (position, count) in zip(parts, expected)
                           if count and len(saved_for_backward[position]) == 0]
            except Exception:  # noqa: BLE001 - not the shape Thunder hands over: the call says what is wrong
                emptied = []
            if emptied:  # a collection of another size was never emptied: the call itself says what is wrong
                _report(emptied, saved_for_backward, culprits)
        return function(saved_for_backward, *args, **kwargs)

    return backward_fn


def _report(short: list[EmptiedPart], saved_for_backward: Any, culprits: Mapping[int, tuple[str, str]]) -> None:
    errors = []
    for part in short:
        culprit = culprits.get(part.position, ("code generation", "TraceCtx.python_callable"))
        got = len(saved_for_backward[part.position])
        violation = Violation(
            _KIND, part.collection,
            f"the backward about to run is handed {got} saved values in {part.collection} where it unpacks "
            f"{len(part.names)} ({', '.join(part.names)}): an earlier call of this backward emptied the "
            f"collection (clear_mutable_collection({part.collection})), and the forward handed over that same "
            "list again, as autograd does for a second backward over one graph (retain_graph=True); it would "
            f"fail unpacking {part.collection}",
            f"the saved-for-backward hand-over of backward_fn, made by {culprit[0]} ({culprit[1]})",
            also=part.names,
            culprit=culprit,
        )
        errors.append(violation.to_error(find_call_site()))
    report_all(errors)


def _culprit(compilation: compilations.Compilation, trace: Any, position: int) -> tuple[str, str]:
    """The first step whose forward hands the collection at ``position`` over as a list (which the backward's
    emptying then changes for every later call); else the step that made the backward, which empties it."""
    for step in compilation.steps:
        made = step.ref()
        if made is not None and not compilations.is_backward(made) and isinstance(saved_part(made, position), list):
            return step.culprit
    made_by = compilation.step_of(trace)
    return made_by.culprit if made_by is not None else ("code generation", f"{type(trace).__module__}.TraceCtx.python_callable")
