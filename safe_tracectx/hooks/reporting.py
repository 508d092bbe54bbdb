"""What a violation is charged to, and how it is reported: culprits, actions, notes on a failing pass.

A violation found in a trace is charged to the first step of the compilation
whose trace already had it (``Compilation.culprit_of``), else to the step that
made the trace, else to the pass that returned or handed it on. When a pass
raises, what it read and the traces Thunder named while it ran are checked,
and what is wrong becomes notes on its exception, which is never replaced::

    >>> from safe_tracectx.hooks.reporting import internal_error
    >>> import warnings
    >>> with warnings.catch_warnings(record=True) as seen:
    ...     warnings.simplefilter("always")
    ...     internal_error("a trace", KeyError("x"))
    >>> "bug in safe-tracectx" in str(seen[0].message)
    True
"""

from __future__ import annotations

import warnings
from typing import Any, Protocol

from thunder.core.trace import TraceCtx

from safe_tracectx._support import events
from safe_tracectx._support.callsite import find_call_site
from safe_tracectx._support.labels import describe_trace
from safe_tracectx.errors import TraceContextError
from safe_tracectx.hooks import compilation as compilations
from safe_tracectx.policy import get_policy
from safe_tracectx.policy.actions import act, action_for, record
from safe_tracectx.traces.checks import Violation
from safe_tracectx.traces.handover import check_handover



class PassRun(Protocol):
    """What a report reads of a pass run (``safe_tracectx.hooks.runs.PassRun``, which imports this module)."""

    label: str
    qualname: str
    pair: bool
    inputs: list[TraceCtx]
    compilation: compilations.Compilation | None
    _first_step: int

    @property
    def parent(self) -> PassRun | None: ...

__all__ = ["culprit_error", "explain_failure", "internal_error", "report", "report_all", "run_error", "switched_off"]


def culprit_error(
    compilation: compilations.Compilation | None, violation: Violation, trace: TraceCtx, site: Any, *,
    fallback: tuple[str, str], context: str, known: compilations.Step | None = None,
) -> TraceContextError:
    """The error for ``violation`` found in ``trace``, charged to what made it.

    That is what the violation itself names (``Violation.culprit``: a symbol's
    meta), else the first step of the compilation whose trace has it; else the
    step that made ``trace``; else ``fallback`` (the pass that returned or handed
    on the trace); the step is said in the message. ``known`` is the step already
    found to be the culprit.
    """
    step = known
    if step is None and compilation is not None:
        step = compilation.culprit_of(violation.kind, violation.name)
    if step is None and compilation is not None:
        step = compilation.step_of(trace)
    made_by = violation.culprit or (fallback if step is None else step.culprit)
    error = violation.to_error(site, context=context)
    if step is not None and made_by != fallback:
        error.message += f"; it first appears in the trace made by {step.describe()}"
        error.args = (error._render(),)
    error.culprit = made_by
    return error


def switched_off(kind: str) -> bool:
    """Whether the policy in force switches the trace check ``kind`` off (then it is no finding at all)."""
    return get_policy().action_of_check(kind) == "off"


def run_error(run: PassRun, violation: Violation, trace: TraceCtx, site: Any, *, verb: str) -> TraceContextError:
    """The error for ``violation`` in ``trace``, which ``run`` read or produced (``verb``)."""
    handed_on = trace in run.inputs and run.parent is not None  # built by the pass that called this one
    fallback = (run.parent.label, run.parent.qualname) if handed_on and run.parent else (run.label, run.qualname)
    return culprit_error(
        run.compilation, violation, trace, site, fallback=fallback,
        context=f"{run.label} ({run.qualname}) {verb} {describe_trace(trace)} where ",
    )


def _thunder_checks_traces() -> bool:
    """Whether Thunder's own ``DebugOptions(check_traces=True)`` checks this compilation's traces."""
    try:
        from thunder.core.compile_data import get_compile_data

        options = getattr(get_compile_data(), "debug_options", None)
    except Exception:  # noqa: BLE001 - no compile data (outside thunder.jit), or a Thunder without it
        return False
    return bool(getattr(options, "check_traces", False))


def report(error: TraceContextError) -> None:
    """Act on ``error`` per the policy; a use before definition is left to Thunder's own trace checker when the
    user turned it on (it stops at the same trace, with the error the user asked for), and only recorded."""
    if action_for(error) == "off" or events.own_work.get():
        return
    if error.kind == "use-before-definition" and _thunder_checks_traces():
        record(error, "left to Thunder's check_traces")
        return
    act(error)


def report_all(errors: list[TraceContextError]) -> None:
    """Act on each of ``errors`` (found in one pass or step) in order. The first that raises carries the whole
    problem: every other finding is recorded first, and those of its kind are named on it too (a trace that
    reads three undefined names says so at once)."""
    for index, error in enumerate(errors):
        if action_for(error) == "raise" and not (error.kind == "use-before-definition" and _thunder_checks_traces()):
            rest = [other for other in errors[index + 1 :] if action_for(other) != "off"]
            for other in rest:
                record(other, f"found with the raised {type(error).__name__}")
            also = [name for other in rest if other.kind == error.kind for name in other.names
                    if name not in error.names]
            if also:
                error.names = (*error.names, *also)
                error.message += f"; also {', '.join(also)} in the same way"
                error.args = (error._render(),)
        report(error)


def internal_error(what: str, error: Exception) -> None:
    """A check of ours failed: said (a RuntimeWarning asking for a report), and the program goes on unchecked there."""
    warnings.warn(
        f"safe-tracectx could not check {what}: {type(error).__name__}: {error}. This is a bug in safe-tracectx "
        "(please report it); that check was skipped and the program goes on",
        RuntimeWarning,
        stacklevel=3,
    )


def explain_failure(run: PassRun, error: BaseException) -> None:
    """What was wrong in the traces ``run`` read or that were made while it ran, as notes on ``error``.

    The exception is never replaced; each problem is also recorded in the running
    audits (action ``note``). A problem another pass already reported is not repeated.
    """
    compilation = run.compilation
    if compilation is None:
        return
    # What it read, and the traces Thunder named (gave a provenance) while it ran: its finished steps, not the
    # scratch traces its helpers build and throw away.
    traces = [t for t in run.inputs if compilations.checked_kind(t)]
    for step in compilation.steps[run._first_step :]:
        trace = step.ref()
        if trace is not None and step.namer is not None and trace not in traces and compilations.checked_kind(trace):
            traces.append(trace)
    noted: set[tuple[str, str]] = getattr(error, "__safe_tracectx_noted__", set())
    site = None
    found: list[tuple[Violation, TraceCtx]] = [(v, t) for t in traces for v in compilation.findings(t)[0]]
    if run.pair and len(run.inputs) == 2:  # a pair pass failed on a pair: what the hand-over holds, said in full
        found += [(v, run.inputs[1]) for v in check_handover(*run.inputs, unread=True)]
    for violation, trace in found:
        key = (violation.kind, violation.name)
        if key in noted or key in compilation.reported:
            continue
        noted.add(key)
        compilation.reported.add(key)
        site = site or find_call_site()
        if switched_off(violation.kind):
            continue
        explained = run_error(run, violation, trace, site, verb="failed on")
        error.add_note(f"safe-tracectx: {explained.message}\n  fix: {explained.fix}")
        record(explained, "note")
    try:
        error.__safe_tracectx_noted__ = noted  # type: ignore[attr-defined]
    except (AttributeError, TypeError):  # an exception type that takes no attributes
        pass
