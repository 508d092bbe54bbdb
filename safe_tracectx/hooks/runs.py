"""One pass run: timed, its proxies counted, its traces checked and fingerprinted, a ``pass_run`` event.

Every hooked pass (Thunder's remat and autodiff functions, each Transform
method, each executor's ``fusion_pass``, ``audited_pass`` blocks) goes through
:func:`run_pass` or a :class:`PassRun` used by hand. What it returns is
checked, and so is every trace it reads that no step of the compilation made
(a trace built by hand and handed on, like the joint trace of a forward/backward
rematerialization). A violation is charged to the first step whose trace had
it. When the pass raises, what it read and what was made while it ran is
checked, and what is wrong is added to the exception as notes::

    >>> from thunder.core.trace import TraceCtx
    >>> from safe_tracectx.hooks.runs import run_pass
    >>> trace = TraceCtx()
    >>> run_pass("noop", "tests.noop", "user", lambda t: t, (trace,), {}) is trace
    True
"""

from __future__ import annotations

import dataclasses
import sys
import time
from collections.abc import Callable, Iterable
from contextvars import ContextVar, Token
from typing import Any, Final

from thunder.core.trace import TraceCtx

from safe_tracectx._support import events
from safe_tracectx._support.callsite import CallSite, find_call_site, user_definition
from safe_tracectx._support.labels import describe_trace
from safe_tracectx._support.pass_catalog import PASSES, Precondition
from safe_tracectx.hooks import compilation as compilations
from safe_tracectx.hooks import cache_reuse, call_grad_mode, faults, fx_outputs, fx_splits, grad_mode_requests, leaf_updates, trace_states
from safe_tracectx.hooks.pass_values import pair_sides, traces_in
from safe_tracectx.hooks.preconditions import check_preconditions
from safe_tracectx.hooks.reporting import explain_failure, internal_error, report_all, run_error, switched_off
from safe_tracectx.traces import swaps
from safe_tracectx.traces.bound_proxies import proxy_args, proxy_outs
from safe_tracectx.traces.checks import Violation, check_forward_backward, generatable
from safe_tracectx.traces.dropped_gradients import dropped_gradients
from safe_tracectx.traces.fingerprint import fingerprint, packed_fingerprint

__all__ = ["DECLARED", "PassRun", "current_run", "pair_sides", "run_pass", "traces_in"]

#: ``audited_pass`` labels declared in this process -> their function (or ``block``); ``thunder_support()`` lists them.
DECLARED: Final[dict[str, str]] = {}

#: Thunder's autodiff passes: the first one a compilation runs is given the program the split differentiates.
_DIFFERENTIATING: Final = frozenset(spec.qualname for spec in PASSES if spec.kind == "autodiff")

#: The innermost pass running in this context (its proxies are counted on it).
current_run: Final[ContextVar[PassRun | None]] = ContextVar("safe_tracectx.current_run", default=None)


class PassRun:
    """A pass while it runs: label, kind, role, inputs; proxies made directly in it and the traces that named them."""

    __slots__ = ("label", "qualname", "kind", "role", "pair", "owner", "inputs", "proxies", "namers", "traced_only",
                 "compilation", "parent", "preconditions", "unregistered", "thunderfx", "defined_at", "_started",
                 "_tokens", "_entry", "_first_step", "_symbols", "_given", "_metadata")

    def __init__(
        self, label: str, qualname: str, kind: str, inputs: Iterable[Any] = (), *, role: str | None = None,
        pair: bool = False, owner: object = None, traced_only: bool = False, starts_compilation: bool = False,
        preconditions: tuple[Precondition, ...] = (), defined_at: CallSite | None = None,
    ) -> None:
        #: Where the pass's function is defined, when that is the user's code: the site of what it is charged with.
        self.defined_at = defined_at
        #: What its inputs are checked for when it starts (``pass_catalog.Precondition``).
        self.preconditions = preconditions
        #: Report the run only if it read or returned a trace or made a proxy (the state-dict hooks).
        self.traced_only = traced_only
        self.label, self.qualname, self.kind, self.pair, self.owner = label, qualname, kind, pair, owner
        values = tuple(inputs)
        self.inputs = [t for value in values for t in traces_in(value)]
        #: ThunderFX: the FX graph and split module a compilation interprets (its function is the first input),
        #: or the split the splitter made (``hooks.fx_splits``); None elsewhere.
        self.thunderfx = fx_splits.compiled_by(values[0]) if starts_compilation and values else None
        # the interpretation is given (fn, args, kwargs): the user's call
        compilation = compilations.start(frame=sys._getframe(), call=values[1:3]) if starts_compilation else compilations.current()
        if compilation is not None and not starts_compilation and not any(compilation.owns(t) for t in self.inputs):
            compilation = None  # a pass outside the compilation running in this context
        #: The compilation this pass is part of (pair, steps and what was reported already).
        self.compilation = compilation
        # A pair pass's role is per side of its result, not its input's.
        if role is None and not pair and compilation is not None and self.inputs and kind in ("transform", "fusion", "user"):
            role = compilation.role_of(self.inputs[0])
        self.role = role
        if compilation is not None and compilation.differentiates is None and qualname in _DIFFERENTIATING and self.inputs:
            compilation.differentiates = self.inputs[0]
        self.proxies = 0
        #: id(trace) -> (trace, first name it gave) for proxies made directly in this run.
        self.namers: dict[int, tuple[Any, str]] = {}
        #: id(names set) -> (input trace, the names its symbols use that it has not registered), filled by the
        #: naming hook when this run first names a proxy with that set (safe_tracectx.hooks.naming).
        self.unregistered: dict[int, tuple[TraceCtx | None, dict[str, str]]] = {}
        self.parent: PassRun | None = None
        self._started = 0.0
        self._tokens: tuple[Token[str | None], Token[PassRun | None]] | None = None
        self._entry: list[list[list[Any]]] | None = None
        self._first_step = 0
        #: The bound symbols of each input at entry (by identity): an input changed in place is an output.
        self._symbols: list[tuple[int, ...]] = []
        #: What it was given, for the ``pass_run`` event: per input the number of its state, and the (packed)
        #: fingerprints of those no recorded pass run returned (``trace_states``); None when no audit was listening.
        self._given: tuple[list[int], dict[str, str]] | None = None

    def enter(self) -> PassRun:
        """The pass begins: an injection point, then it is the current pass."""
        faults.point("pass", self.label)
        self.parent = current_run.get()
        self._tokens = (events.current_pass.set(self.label), current_run.set(self))
        if faults.injector is not None:
            self._entry = [fingerprint(t) for t in self.inputs]
        if events.sinks:
            self._given = trace_states.inputs_given(self.inputs)
        if self.compilation is not None:
            self._first_step = len(self.compilation.steps)
            self._symbols = [tuple(map(id, t.bound_symbols)) for t in self.inputs]
            self._metadata = swaps.input_metadata(filter(compilations.checked_kind, self.inputs))  # (shape, dtype)
        if self.preconditions:
            try:
                check_preconditions(self)
            except BaseException:  # refused before it ran: no longer the current pass
                tokens, self._tokens = self._tokens, None
                events.current_pass.reset(tokens[0])
                current_run.reset(tokens[1])
                raise
        self._started = time.perf_counter()
        return self

    def leave(self, result: Any = None, *, failed: bool = False, error: BaseException | None = None) -> None:
        """The pass ended (with ``result``, or ``failed`` with ``error``): check, report, act per the policy."""
        seconds = time.perf_counter() - self._started
        tokens, self._tokens = self._tokens, None
        try:  # still the current pass: its violations are events of this pass
            if failed:
                self._check_inputs_kept()
                if error is not None:
                    try:
                        explain_failure(self, error)
                    except Exception as bug:  # noqa: BLE001 - never in the way of the pass's own exception
                        internal_error(f"what {self.label} failed on", bug)
            else:
                _finish(self, traces_in(result), seconds, pair_sides(result) if self.pair else None)
        finally:
            if tokens is not None:
                events.current_pass.reset(tokens[0])
                current_run.reset(tokens[1])

    def _check_inputs_kept(self) -> None:
        injector = faults.injector
        if injector is None or self._entry is None:
            return
        for trace, before in zip(self.inputs, self._entry, strict=True):
            if fingerprint(trace) != before:
                injector.changed_inputs.append({"label": self.label, "trace": describe_trace(trace)})


def run_pass(
    label: str, qualname: str, kind: str, original: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any],
    *, role: str | None = None, pair: bool = False, owner: object = None, traced_only: bool = False,
    starts_compilation: bool = False, preconditions: tuple[Precondition, ...] = (),
) -> Any:
    """``original(*args, **kwargs)`` run as a pass (see :class:`PassRun`)."""
    if events.own_work.get():  # this package's own replay of a trace: not the user's compilation
        return original(*args, **kwargs)
    inputs = (*args, *kwargs.values())
    run = PassRun(
        label, qualname, kind, inputs, role=role, pair=pair, owner=owner, traced_only=traced_only,
        starts_compilation=starts_compilation, preconditions=preconditions,
        defined_at=user_definition(original),
    ).enter()
    try:
        result = original(*args, **kwargs)
    except BaseException as error:
        run.leave(failed=True, error=error)
        raise
    run.leave(result)
    return result


# ---- who made it ---------------------------------------------------------------------


def _found_in(run: PassRun, trace: TraceCtx, violations: list[Violation]) -> list[tuple[Violation, TraceCtx]]:
    """The violations not reported yet in this compilation (each kind and name once)."""
    compilation = run.compilation
    if compilation is None:
        return [(v, trace) for v in violations]
    new = [(v, trace) for v in violations if (v.kind, v.name) not in compilation.reported]
    compilation.reported.update((v.kind, v.name) for v, _ in new)
    return new


# ---- a pass that returned ------------------------------------------------------------


def _update_pair(run: PassRun, outputs: list[TraceCtx], sides: tuple[TraceCtx | None, TraceCtx | None] | None) -> None:
    """A pair pass replaces each side it returns; a pass of one role replaces that side."""
    compilation = run.compilation
    if compilation is None:
        return
    if sides is not None:
        compilation.forward = sides[0] if sides[0] is not None else compilation.forward
        compilation.backward = sides[1] if sides[1] is not None else compilation.backward
    elif run.role in ("forward", "backward") and len(outputs) == 1:
        setattr(compilation, run.role, outputs[0])  # the side of that role


def _pair_violations(run: PassRun, sides: tuple[TraceCtx | None, TraceCtx | None] | None) -> list[tuple[Violation, TraceCtx]]:
    """Hand-over mismatches between the forward and backward a pair pass returned together.

    Only a pass that returns both sides promises they match; between two such
    passes each side is transformed on its own and the two may disagree for a
    while (the hand-over is checked again when both are about to run,
    ``steps.check_about_to_run``).
    """
    if sides is None or sides[0] is None:
        return []
    found = [] if sides[1] is None else check_forward_backward(sides[0], sides[1])
    compilation = run.compilation
    if compilation is not None and compilation.judges_gradients():
        found += [v if v.culprit else dataclasses.replace(v, culprit=(run.label, run.qualname))  # the pass made it
                  for v in dropped_gradients(compilation.differentiates, *sides, grad_enabled=compilation.grad_enabled)]
    return _found_in(run, sides[1] if sides[1] is not None else sides[0], found)


def _borrowed(run: PassRun, outputs: list[TraceCtx]) -> list[tuple[Violation, TraceCtx]]:
    """A proxy named by a trace of this compilation that this pass neither reads nor returns, whose name
    the output it went into can hand out again (registered in the lender, not where it is used)."""
    compilation = run.compilation
    if compilation is None or not run.namers:
        return []
    own = {id(t) for t in (*run.inputs, *outputs)}
    found = []
    for key, (lender, name) in run.namers.items():
        if key in own or lender not in compilation.traces:
            continue
        for trace in outputs:
            if name not in trace.names and generatable(name, trace) and _uses(trace, name):
                found.append((Violation(
                    "borrowed-namer", name,
                    f"{run.label} named {name} with {describe_trace(lender)}, a trace it neither reads nor returns "
                    f"(it made that trace active only to borrow its namer), and {name} is not registered in the "
                    "trace it went into, whose namer will hand it out again",
                    "proxy creation",
                ), trace))
                break
    return _found_in(run, outputs[0], [v for v, _ in found]) if found else []


def _uses(trace: TraceCtx, name: str) -> bool:
    return any(p.name == name for bsym in trace.bound_symbols for p in (*proxy_args(bsym), *proxy_outs(bsym)))


def _found_after(
    run: PassRun, outputs: list[TraceCtx], sides: tuple[TraceCtx | None, TraceCtx | None] | None
) -> list[tuple[Violation, TraceCtx]]:
    """What is wrong after ``run``: in what it reads that no step made and no check saw (a trace built by hand
    and handed on), in what it returns (each trace checked once while unchanged), and between a pair's sides."""
    compilation = run.compilation
    found: list[tuple[Violation, TraceCtx]] = []
    if compilation is None:
        from safe_tracectx.traces.checks import check_trace

        found = [(v, t) for t in outputs if compilations.checked_kind(t) for v in check_trace(t)]
    else:
        changed = [t for t, before in zip(run.inputs, run._symbols) if tuple(map(id, t.bound_symbols)) != before]
        for trace in changed:  # changed in place: the trace is now what this pass made of it
            compilation.remake(trace, run.label, run.qualname, within=run.parent.label if run.parent else None)
        for trace in (*run.inputs, *outputs):
            if trace in changed:
                found += _found_in(run, trace, compilation.findings(trace)[0])
                continue
            if not compilations.checked_kind(trace) or (trace in run.inputs and compilation.step_of(trace) is not None):
                continue
            if trace in run.inputs and compilation.seen(trace):
                continue
            found += _found_in(run, trace, compilation.findings(trace)[0])
        for trace in outputs:
            if compilation.step_of(trace) is None:
                compilation.record_step(trace, run.label, run.qualname, within=None)
        if run.kind == "tracing":  # the interpretation's computation traces: their grad-mode markers are still there
            interpreted = compilation.interpreted(outputs, since=run._first_step, maker=run.qualname)
            lost = [*compilation.detached(interpreted), *grad_mode_requests.unrecorded(compilation, interpreted, run.thunderfx)]
            found += [f for v, t in lost for f in _found_in(run, t, [v])]
            call_grad_mode.watch(compilation, outputs, run.thunderfx)
            leaf_updates.watch(compilation, interpreted, (run.label, run.qualname))
            cache_reuse.watch(compilation, interpreted)
            fx_outputs.watch(interpreted, run.thunderfx)
            compilation.read_program(interpreted, until=grad_mode_requests.markers_followed_until(interpreted))
        if resized := swaps.changed_in_place(run.label, run._metadata, zip(run.inputs, run._symbols)):
            found += [f for t in filter(compilations.checked_kind, outputs) for f in _found_in(run, t, swaps.computed_before(resized, t))]
    found += _pair_violations(run, sides)
    found += _borrowed(run, outputs)
    return found


def _finish(
    run: PassRun, outputs: list[TraceCtx], seconds: float, sides: tuple[TraceCtx | None, TraceCtx | None] | None = None
) -> None:
    if run.traced_only and not (run.inputs or outputs or run.proxies):
        return
    _update_pair(run, outputs, sides)
    try:
        found = _found_after(run, outputs, sides)
    except Exception as bug:  # noqa: BLE001 - a bug of ours never stops the user's program
        internal_error(f"the output of {run.label}", bug)
        found = []
    compilation = run.compilation
    if compilation is not None:
        for trace in (*run.inputs, *outputs):
            compilation.add(trace)
    site = find_call_site() if found or events.sinks else None
    found = [(v, t) for v, t in found if not switched_off(v.kind)]  # no finding, not even in the run's record
    errors = [run_error(run, v, t, run.defined_at or site, verb="read" if t in run.inputs and t not in outputs else "produced")
              for v, t in found]
    if events.sinks:
        input_ids, input_fingerprints = run._given if run._given is not None else (None, None)
        events.emit(
            "pass_run",
            trace=outputs[-1] if outputs else None,
            site=site,
            label=run.label,
            kind=run.kind,
            role=run.role,
            qualname=run.qualname,
            seconds=seconds,
            traces=len(outputs),
            changed=_changed(run.inputs, outputs),
            proxies=run.proxies,
            violations=[str(v) for v, _ in found],
            fingerprints=[packed_fingerprint(t) for t in outputs],  # a document unpacks them
            thunderfx=run.thunderfx,
            output_ids=[trace_states.returned(t) for t in outputs],
            input_ids=input_ids,
            input_fingerprints=input_fingerprints,
        )
    report_all(errors)


def _changed(inputs: list[TraceCtx], outputs: list[TraceCtx]) -> bool:
    if not outputs:
        return False
    return [tuple(map(id, t.bound_symbols)) for t in outputs] != [tuple(map(id, t.bound_symbols)) for t in inputs]


