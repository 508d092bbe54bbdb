"""The proxy-naming hook: ``thunder.core.proxies.make_proxy_name`` under ``Policy.missing_trace``, observed.

Without an active trace Thunder fails with ``AttributeError: 'NoneType' object
has no attribute 'make_name'``; the hook instead raises ``MissingTraceError``
naming the user's line (strict), or names the proxy traceless (lenient). With
a trace active it calls Thunder's own ``make_proxy_name`` and only watches: an
explicit name Thunder silently replaced by another (``replaced-name``), or an
explicit name the trace already held and accepted a second time
(``name-taken``), is a violation of ``Policy.name_clash``; so is a name the
namer handed out that the symbols of the trace the running pass was given
already use without having registered it (two values, one name). The name the
proxy gets is always Thunder's.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from types import FrameType
from typing import Any, Final

from thunder.core.trace import TraceCtx

from safe_tracectx._support import events
from safe_tracectx._support.callsite import calling_code, find_call_site, find_frame
from safe_tracectx._support.labels import describe_trace
from safe_tracectx.context.blocks import TRACE_VAR
from safe_tracectx.context.lookup import on_missing_trace
from safe_tracectx.hooks import faults
from safe_tracectx.hooks.reporting import internal_error
from safe_tracectx.hooks.runs import PassRun, current_run
from safe_tracectx.policy.actions import act
from safe_tracectx.traces.checks import Violation, names_used, unregistered_names
from safe_tracectx.traces.swaps import same_name_swap_is_safe

__all__ = ["make_naming_hook"]

_trace_get: Final = TRACE_VAR.get
#: Whether the installed Thunder takes explicit names as hints (set when the hook is made).
_HINTS = False
_run_get: Final = current_run.get


def _in_proxy_init(frame: FrameType) -> bool:
    return frame.f_code.co_name == "__init__" and frame.f_locals.get("self") is not None


def _what_is_being_made() -> str:
    """'creating a TensorProxy', from the Proxy.__init__ frame above the hook."""
    init = find_frame(_in_proxy_init, sys._getframe(2), limit=4)
    return "naming a proxy" if init is None else f"creating a {type(init.f_locals['self']).__name__}"


def _hints() -> bool:
    """Whether this Thunder takes an explicit proxy name as a hint: before #1596 (2025-01-08) ``make_proxy_name``
    registered the name if free and silently made another if not, and Thunder's own code relied on that."""
    import thunder.core.proxies as proxies

    return hasattr(proxies, "register_proxy_name")


def _thunders(asker: str | None) -> bool:
    """Whether Thunder's own code (not its tests, not the user's) asked for the name."""
    return asker is not None and asker.startswith("thunder.") and not asker.startswith("thunder.tests")


def _to_report(asker: str | None) -> bool:
    """Whether an explicit name the trace holds already is a violation, by this Thunder's naming semantics.

    Where names are hints (before #1596), Thunder's own code relies on getting another name, and the user's
    explicit name silently lost is the violation. Where names are exact, Thunder refuses a taken name with its
    own RuntimeError: the user asking twice gets that error as designed; Thunder's own code asking is a pass
    about to crash, reported first, naming the pass.
    """
    return _thunders(asker) != _HINTS


#: Modules whose frames ask for a name on their caller's behalf (the proxy constructors, the trace interpreter).
_ON_BEHALF: Final = ("thunder.core.proxies", "thunder.core.trace_interpreter")


def _asker(frame: FrameType | None) -> str | None:
    """``module.qualname`` of the code that asked for the name (past Thunder's proxy constructors)."""
    code = calling_code(frame, _ON_BEHALF)
    return None if code is None else code[0]


def _report_name(trace: object, name: str, made: str | None, asker: str | None) -> None:
    """An explicit name the trace already holds (``made`` None: asked for, before Thunder refuses it), or one
    Thunder silently replaced by ``made``; once per compilation and name."""
    from safe_tracectx.hooks import compilation as compilations
    from safe_tracectx._support.pass_catalog import step_label

    if made is None:
        violation = Violation(
            "name-taken", name,
            # Thunder's own words first: code that catches its refusal still matches ours
            f"Trying to add the name {name} to a trace, but that name is already used: a proxy asks for {name}, "
            f"which {describe_trace(trace)} already holds",
            "proxy creation",
        )
    else:
        violation = Violation(
            "replaced-name", name,
            f"a proxy asked for the name {name}, which {describe_trace(trace)} already holds, and Thunder named it "
            f"{made} instead: code that refers to it as {name} means another proxy",
            "proxy creation",
        )
    if made is not None:  # the user's name, lost: Thunder's naming did it
        culprit: tuple[str, str] | None = ("proxy naming", "thunder.core.proxies.make_proxy_name")
    elif asker is not None:  # Thunder's own code asked for a name it holds: that code
        culprit = (step_label(None, asker), asker)
    else:
        culprit = None
    _act_once(compilations.current(), violation, "", culprit, "" if asker is None else f" (asked by {asker})")


def _act_once(compilation: Any, violation: Violation, within: str, culprit: tuple[str, str] | None, more: str) -> None:
    """Apply the policy to a naming violation, once per compilation and (kind, name): charged to ``culprit``,
    with ``more`` added to its message."""
    if compilation is not None:
        if (violation.kind, violation.name) in compilation.reported:
            return
        compilation.reported.add((violation.kind, violation.name))
    error = violation.to_error(find_call_site(), context=f"while {_what_is_being_made()}{within}: ")
    if culprit is not None:
        error.culprit = culprit
    if more:
        error.message += more
        error.args = (error._render(),)
    act(error)


def _names_in_use(run: PassRun, trace: Any) -> tuple[TraceCtx | None, dict[str, str]]:
    """The input trace of ``run`` that shares ``trace``'s names set, and the names its symbols use unregistered
    (taken once per run and names set, before the run's namer hands out its first name)."""
    names = trace.names
    known = run.unregistered.get(id(names))
    if known is None:
        given = next((t for t in run.inputs if t.names is names), None)
        try:
            # Where Thunder's swap takes a same-named replacement for one variable, a subsymbol's name handed out
            # again is the executor running that subsymbol anew; a second value under it shows in the pass's output.
            nested = not same_name_swap_is_safe()
            known = (given, unregistered_names(given, subsymbols=nested) if given is not None else {})
        except Exception as bug:  # noqa: BLE001 - a bug of ours never stops the user's program
            internal_error(f"the names of the input of {run.label}", bug)
            known = (given, {})
        run.unregistered[id(names)] = known
    return known


def _check_fresh(run: PassRun, known: tuple[TraceCtx | None, dict[str, str]], made: str) -> None:
    """``made``, fresh from a namer, against the names the input trace sharing its names set already uses."""
    given, taken = known
    where = taken.get(made)
    if where is None or given is None:
        return
    violation = Violation(
        "name-taken", made,
        f"Thunder's namer gave a new proxy the name {made}, which {describe_trace(given)} (given to {run.label}) "
        f"already uses in {where} without having registered it: two values now share one name",
        "proxy creation",
    )
    compilation = run.compilation
    if compilation is not None and (violation.kind, made) in compilation.reported:
        return
    step = _first_user(compilation, given, made) if compilation is not None else None
    if step is None:
        _act_once(compilation, violation, f" in {run.label}", (run.label, run.qualname), "")
    else:
        _act_once(compilation, violation, f" in {run.label}", step.culprit,
                  f"; {made} first appears unregistered in the trace made by {step.describe()}")


def _first_user(compilation: Any, given: TraceCtx, name: str) -> Any:
    """The first step of ``compilation`` whose trace shares ``given``'s names set and uses ``name``: what put the
    name there without registering it (the violation path only: it reads every such trace)."""
    for step in compilation.steps:
        trace = step.ref()
        if trace is not None and trace.names is given.names and name in names_used(trace):
            return step
    return compilation.step_of(given)


def make_naming_hook(original: Callable[..., str]) -> Callable[..., str]:
    """A ``make_proxy_name`` that applies the policy when no trace is active and reports to the audit."""
    global _HINTS
    _HINTS = _hints()
    same_name_swap_is_safe()  # asked of Thunder now, before any hook is in place

    def make_proxy_name(*, name: str | None = None, prefix: str | None = None) -> str:
        if faults.injector is not None:
            faults.point("proxy", events.current_pass.get())
        trace = _trace_get(None)
        run = _run_get()
        if trace is None:
            trace = on_missing_trace(_what_is_being_made())
            if trace is None:  # warn/log/ignore: Thunder's own behaviour
                return original(name=name, prefix=prefix)
            if events.sinks:
                events.emit("proxy_traceless", trace=None, site=find_call_site(skip_thunder=True))
            made: str = trace.make_name(name=name, prefix=prefix)  # the traceless trace: ours to name with
        else:
            if name is not None and name in trace.names:
                asker = _asker(sys._getframe(1))
                if _to_report(asker) and not _HINTS:
                    _report_name(trace, name, None, asker)  # before Thunder refuses it
                made = original(name=name, prefix=prefix)
                if made != name and _to_report(asker):
                    _report_name(trace, name, made, asker)
            elif name is None and run is not None and run.inputs:
                known = _names_in_use(run, trace)
                made = original(name=name, prefix=prefix)
                if made in known[1]:
                    _check_fresh(run, known, made)
            else:
                made = original(name=name, prefix=prefix)
        if run is not None:
            run.proxies += 1
            if id(trace) not in run.namers:
                run.namers[id(trace)] = (trace, made)
        if events.proxy_sinks:
            events.proxy_created(trace, made)
        return made

    make_proxy_name.__wrapped__ = original  # type: ignore[attr-defined]
    make_proxy_name.__doc__ = original.__doc__
    return make_proxy_name
