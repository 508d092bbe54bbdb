"""One pass run: timed, its proxies counted, its output validated and fingerprinted, a ``pass_run`` event.

Every hooked pass (Thunder's remat and autodiff functions, each Transform
method, each executor's ``fusion_pass``, ``audited_pass`` blocks) goes through
:func:`run_pass` or a :class:`PassRun` used by hand::

    >>> from thunder.core.trace import TraceCtx
    >>> from safe_tracectx.hooks.runs import run_pass
    >>> trace = TraceCtx()
    >>> run_pass("noop", "tests.noop", "user", lambda t: t, (trace,), {}) is trace
    True
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from contextvars import ContextVar, Token
from typing import Any, Final

from thunder.core.trace import TraceCtx

from safe_tracectx import events
from safe_tracectx.actions import act
from safe_tracectx.callsite import find_call_site
from safe_tracectx.checks import Violation, check_forward_backward, check_trace
from safe_tracectx.fingerprint import fingerprint, names_defined_by
from safe_tracectx.hooks import faults, pairs
from safe_tracectx.labels import describe_trace

__all__ = ["DECLARED", "PassRun", "current_run", "pair_sides", "run_pass", "traces_in"]

#: ``audited_pass`` labels declared in this process -> their function (or ``block``); ``thunder_support()`` lists them.
DECLARED: Final[dict[str, str]] = {}

#: The innermost pass running in this context (its proxies are counted on it).
current_run: Final[ContextVar[PassRun | None]] = ContextVar("safe_tracectx.current_run", default=None)


def traces_in(value: Any) -> list[TraceCtx]:
    """The traces in a pass's argument or result: a trace, a tuple/list of them, or Thunder's TraceResults."""
    if isinstance(value, TraceCtx):
        return [value]
    if isinstance(value, tuple | list):
        return [t for item in value for t in traces_in(item)]
    if type(value).__name__ != "TraceResults":
        return []
    found = [getattr(value, a, None) for a in ("prologue_trace", "computation_trace", "epilogue_trace")]
    return [t for t in found if isinstance(t, TraceCtx)]


def pair_sides(value: Any) -> tuple[TraceCtx | None, TraceCtx | None] | None:
    """(forward, backward) of a pair pass's result, either None when absent; None if it is not a pair.

    ``((fw, bw),)`` counts as ``(fw, bw)`` (a block's ``p.outputs((fw, bw))``).
    """
    while isinstance(value, tuple | list) and len(value) == 1 and isinstance(value[0], tuple | list):
        value = value[0]
    if not isinstance(value, tuple | list) or len(value) != 2:
        return None
    fw, bw = value
    if all(side is None or isinstance(side, TraceCtx) for side in (fw, bw)):
        return fw, bw
    return None


class PassRun:
    """A pass while it runs: label, kind, role, inputs; proxies made directly in it and the traces that named them."""

    __slots__ = ("label", "qualname", "kind", "role", "pair", "owner", "inputs", "proxies", "namers", "traced_only", "compilation",
                 "_started", "_tokens", "_entry")

    def __init__(
        self, label: str, qualname: str, kind: str, inputs: Iterable[Any] = (), *, role: str | None = None,
        pair: bool = False, owner: object = None, traced_only: bool = False,
    ) -> None:
        #: Report the run only if it read or returned a trace or made a proxy (the state-dict hooks).
        self.traced_only = traced_only
        self.label, self.qualname, self.kind, self.pair, self.owner = label, qualname, kind, pair, owner
        self.inputs = [t for value in inputs for t in traces_in(value)]
        compilation = pairs.start() if kind == "tracing" else pairs.current()
        if compilation is not None and kind != "tracing" and not any(compilation.owns(t) for t in self.inputs):
            compilation = None  # a pass outside the compilation running in this thread
        #: The compilation this pass is part of (pair, history and what was reported already).
        self.compilation = compilation
        # A pair pass's role is per side of its result, not its input's.
        if role is None and not pair and compilation is not None and self.inputs and kind in ("transform", "fusion", "user"):
            role = compilation.role_of(self.inputs[0])
        self.role = role
        self.proxies = 0
        #: id(trace) -> (trace, first name it gave) for proxies made directly in this run.
        self.namers: dict[int, tuple[Any, str]] = {}
        self._started = 0.0
        self._tokens: tuple[Token[str | None], Token[PassRun | None]] | None = None
        self._entry: list[list[list[Any]]] | None = None

    def enter(self) -> PassRun:
        """The pass begins: an injection point, then it is the current pass."""
        faults.point("pass", self.label)
        self._tokens = (events.current_pass.set(self.label), current_run.set(self))
        if faults.injector is not None:
            self._entry = [fingerprint(t) for t in self.inputs]
        self._started = time.perf_counter()
        return self

    def leave(self, result: Any = None, *, failed: bool = False) -> None:
        """The pass ended (with ``result``, or ``failed``): validate, report, and act per the policy."""
        seconds = time.perf_counter() - self._started
        tokens, self._tokens = self._tokens, None
        try:  # still the current pass: its violations are events of this pass
            if failed:
                self._check_inputs_kept()
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
) -> Any:
    """``original(*args, **kwargs)`` run as a pass (see :class:`PassRun`)."""
    inputs = (*args, *kwargs.values())
    run = PassRun(label, qualname, kind, inputs, role=role, pair=pair, owner=owner, traced_only=traced_only).enter()
    try:
        result = original(*args, **kwargs)
    except BaseException:
        run.leave(failed=True)
        raise
    run.leave(result)
    return result


def _pair_violations(
    run: PassRun, outputs: list[TraceCtx], compilation: pairs.Compilation | None,
    sides: tuple[TraceCtx | None, TraceCtx | None] | None,
) -> list[tuple[Violation, str, str]]:
    """Forward/backward clashes this output introduced, each with the (label, qualname) of the pass that did."""
    here = (run.label, run.qualname)
    if sides is not None:  # a pair pass: each side that is present replaces its side
        fw, bw = sides
        if compilation is None:
            return [(v, *here) for v in check_forward_backward(fw, bw)] if fw is not None and bw is not None else []
        if fw is not None:
            compilation.forward = fw
        if bw is not None:
            compilation.backward = bw
        compilation.history.append((
            *here,
            None if fw is None else names_defined_by(fw),
            None if bw is None else _backward_names(bw),
        ))
    elif compilation is not None and run.role in ("forward", "backward") and len(outputs) == 1:
        if run.role == "forward":
            compilation.forward = outputs[0]
            compilation.history.append((*here, names_defined_by(outputs[0]), None))
        else:
            compilation.backward = outputs[0]
            compilation.history.append((*here, None, _backward_names(outputs[0])))
    else:
        return []
    if compilation.forward is None or compilation.backward is None:
        return []
    found = check_forward_backward(compilation.forward, compilation.backward)
    new = [v for v in found if v.name not in compilation.clashes]
    compilation.clashes.update(v.name for v in new)
    return [(v, *compilation.culprit(v.name)) for v in new]


def _backward_names(trace: TraceCtx) -> frozenset[str]:
    return names_defined_by(trace, skip_unpack=True)  # the backward unpacks the forward's saved names


def _borrowed(run: PassRun, outputs: list[TraceCtx], compilation: pairs.Compilation | None) -> list[Violation]:
    """A proxy named by a trace of this compilation that this pass neither reads nor returns."""
    if compilation is None or not run.namers:
        return []
    own = {id(t) for t in (*run.inputs, *outputs)}
    return [
        Violation(
            "borrowed-namer",
            name,
            f"{run.label} named {name} with {_side(trace, compilation)}, a trace it neither "
            "reads nor returns "
            "(it made that trace active only to borrow its namer)",
            "proxy creation",
        )
        for key, (trace, name) in run.namers.items()
        if key not in own and trace in compilation.traces
    ]


def _side(trace: Any, compilation: pairs.Compilation) -> str:
    for side, other in (("forward", compilation.forward), ("backward", compilation.backward)):
        if trace is other:
            return f"the {side} trace ({describe_trace(trace)})"
    return describe_trace(trace)


def _finish(
    run: PassRun, outputs: list[TraceCtx], seconds: float, sides: tuple[TraceCtx | None, TraceCtx | None] | None = None
) -> None:
    if run.traced_only and not (run.inputs or outputs or run.proxies):
        return
    compilation = run.compilation
    # A prologue or epilogue unpacks names it never registers: only computation traces are checked.
    checked = [t for t in outputs if pairs.signature_name(t) not in ("prologue", "epilogue")]
    found = [(v, run.label, run.qualname) for t in checked for v in check_trace(t)]
    if compilation is not None:
        found = [f for f in found if (f[0].kind, f[0].name) not in compilation.reported]
        compilation.reported.update((f[0].kind, f[0].name) for f in found)
    found += _pair_violations(run, outputs, compilation, sides)
    found += [(v, run.label, run.qualname) for v in _borrowed(run, outputs, compilation)]
    if compilation is not None:
        for trace in (*run.inputs, *outputs):
            compilation.add(trace)
    site = find_call_site() if found or events.sinks else None
    if events.sinks:
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
            violations=[str(v) for v, _, _ in found],
            fingerprints=[fingerprint(t) for t in outputs],
        )
    for violation, label, qualname in found:
        act(violation.to_error(site, context=f"{label} ({qualname}) produced a trace where "))


def _changed(inputs: list[TraceCtx], outputs: list[TraceCtx]) -> bool:
    if not outputs:
        return False
    return [tuple(map(id, t.bound_symbols)) for t in outputs] != [tuple(map(id, t.bound_symbols)) for t in inputs]
