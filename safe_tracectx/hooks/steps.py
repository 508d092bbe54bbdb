"""Thunder's trace-to-trace steps as they happen, and the check of every trace about to run.

Three methods of ``TraceCtx`` are hooked while installed:

- ``__init__``: a trace made while a compilation runs is a step of it, named by
  the function that made it (``from_trace`` looked through);
- ``set_provenance``: Thunder's own name for the step (``Update aliases for
  in-place ops``, ``Dead Code Elimination``, ...) renames it;
- ``python_callable``: the trace is about to run. It is checked as a program
  that runs as it is (dead code included), and the function Thunder compiled
  from it must find every global name it reads. A callable made only as the
  argument of ``functools.wraps`` (Thunder's lookasides borrow a trace's name
  and signature this way) is read, not run, and is not checked.

Steps cost one append each; they are checked only to find the culprit of a
violation seen elsewhere::

    >>> from thunder.core.trace import TraceCtx
    >>> from safe_tracectx.hooks import installed
    >>> from safe_tracectx.hooks.steps import hooked_methods
    >>> with installed():
    ...     sorted(hooked_methods())
    ['__init__', 'python_callable', 'set_provenance']
    >>> hooked_methods()
    []
"""

from __future__ import annotations

import linecache
import re
import sys
from collections.abc import Callable
from types import FrameType
from typing import Any, Final

from thunder.core.interpreter import make_opaque
from thunder.core.trace import TraceCtx

from safe_tracectx._support.callsite import calling_code, find_call_site
from safe_tracectx._support.labels import describe_trace
from safe_tracectx._support.pass_catalog import step_label
from safe_tracectx.hooks import compilation as compilations
from safe_tracectx.hooks.backward_calls import guarded_backward
from safe_tracectx.hooks.gradient_replay import gradients_about_to_run, wrong_gradient_culprit
from safe_tracectx.hooks.program_updates import first_form, forms_about_to_run, side_of
from safe_tracectx.hooks.reporting import culprit_error, internal_error, report_all, switched_off
from safe_tracectx.hooks.runs import current_run
from safe_tracectx.traces.dropped_gradients import dropped_gradients
from safe_tracectx.traces.checks import Violation, check_forward_backward, check_handover
from safe_tracectx.traces.generated_code import symbols_called, undefined_globals
from safe_tracectx.traces.torch_values import untranslated_values

__all__ = [
    "check_about_to_run", "check_interpreted", "hook_methods", "hooked_methods", "new_findings", "opaque", "replaced_methods",
    "unhook_methods",
]  # fmt: skip

#: (name, original) of each TraceCtx method replaced now.
replaced_methods: Final[list[tuple[str, Any]]] = []
#: Modules whose frames make no step of their own (they build traces for someone else).
#: ``from_trace``, and the trace interpreters a pass subclasses to build its trace (the pass is the maker).
_LOOK_THROUGH: Final = ("thunder.core.trace", "thunder.core.trace_interpreter")


def _maker(frame: FrameType | None) -> tuple[str, str] | None:
    """(``module.qualname``, ``qualname``) of the function that made a trace (None: this package made it, for itself)."""
    return calling_code(frame, _LOOK_THROUGH, own_stops=True, through_constructors=True)


def _within() -> tuple[str | None, str | None]:
    """The pass running now: its label, and its function."""
    run = current_run.get()
    return (None, None) if run is None else (run.label, run.qualname)


def _make_init(original: Callable[..., None]) -> Callable[..., None]:
    def __init__(self: TraceCtx, *args: Any, **kwargs: Any) -> None:
        original(self, *args, **kwargs)
        compilation = compilations.current()
        if compilation is None:
            return
        maker = _maker(sys._getframe(1))
        if maker is not None:
            within, function = _within()
            compilation.record_step(self, step_label(None, *maker), maker[0], within=within, pass_function=function)

    return __init__


def _make_set_provenance(original: Callable[..., None]) -> Callable[..., None]:
    def set_provenance(self: TraceCtx, provenance: Any) -> None:
        original(self, provenance)
        compilation = compilations.current()
        if compilation is None:
            return
        maker = _maker(sys._getframe(1))
        if maker is not None:
            within, function = _within()
            compilation.record_step(
                self, step_label(provenance, *maker), maker[0], within=within, named=True, pass_function=function)

    return set_provenance


#: The text before a call whose result is the function ``functools.wraps`` (or ``update_wrapper``) copies from.
_WRAPS_ARGUMENT: Final = re.compile(r"(?:wraps\(|update_wrapper\([^()]*,)\s*(?:wrapped\s*=\s*)?$")


def _made_for_wraps(frame: FrameType) -> bool:
    """Whether the call ``frame`` is making (of ``python_callable``) is the wrapped function given to
    ``functools.wraps``/``update_wrapper`` (``@wraps(trace.python_callable())`` in Thunder's lookasides): the caller
    copies the function's name, signature and ``__wrapped__`` from it, and never runs it. Read from the caller's
    source: the call's line up to the call, and the three lines before (a decorator split over lines)."""
    try:
        line, _, column, _ = list(frame.f_code.co_positions())[frame.f_lasti // 2]
        if line is None or column is None:
            return False
        lines = [linecache.getline(frame.f_code.co_filename, n) for n in range(max(1, line - 3), line + 1)]
        text = "".join(lines[:-1]) + lines[-1].encode()[:column].decode(errors="replace")
    except (IndexError, ValueError):  # no position for this instruction: a call like any other
        return False
    return _WRAPS_ARGUMENT.search(text) is not None


def _make_python_callable(original: Callable[..., Any]) -> Callable[..., Any]:
    def python_callable(self: TraceCtx, *args: Any, **kwargs: Any) -> Any:
        function = original(self, *args, **kwargs)
        compilation = compilations.current()
        if compilation is not None:
            caller = sys._getframe(1)
            if _made_for_wraps(caller):
                return function
            # thunder.jit's own callables (prologue, computation, epilogue) are the ones it runs and hands results
            # from: a transform may ask for a callable only to read it, before Thunder has translated its types.
            by_jit = caller.f_globals.get("__name__") == "thunder"
            check_about_to_run(compilation, self, function, by_jit=by_jit)
            function = guarded_backward(compilation, self, function)
        return function

    return python_callable


def new_findings(
    compilation: compilations.Compilation, what: str, find: Callable[[], list[Violation]]
) -> list[Violation]:
    """What ``find`` finds that ``compilation`` has not reported yet and the policy does not switch off, now counted
    as reported; a bug of ours in ``find`` is said (``what`` it checked) and finds nothing."""
    try:
        found = find()
    except Exception as error:  # noqa: BLE001 - a bug of ours never stops the user's program
        internal_error(what, error)
        return []
    new = [v for v in found if (v.kind, v.name) not in compilation.reported and not switched_off(v.kind)]
    compilation.reported.update((v.kind, v.name) for v in new)
    return new


def check_about_to_run(
    compilation: compilations.Compilation, trace: TraceCtx, function: Any, *, by_jit: bool = False
) -> None:
    """``trace`` is about to run (as ``function``, when Thunder compiled it): its program as it is, and the names
    ``function`` reads; ``by_jit``: thunder.jit made ``function`` to run it, so what it hands Python must be torch's."""
    new = new_findings(compilation, f"the program of {describe_trace(trace)}",
                        lambda: _about_to_run(compilation, trace, function, by_jit=by_jit))
    if not new:
        return
    site = find_call_site()
    made = compilation.step_of(trace)
    fallback = made.culprit if made is not None else ("code generation", f"{type(trace).__module__}.TraceCtx.python_callable")
    maker = f", made by {made.describe()}" if made is not None else ""
    errors = []
    for violation in new:
        step = (_handover_culprit(compilation) if violation.kind == "handover-mismatch"
                else _symbol_call_culprit(compilation, trace, violation.name) if violation.kind == "generated-code"
                else _dropped_culprit(compilation, violation.name) if violation.kind == "gradient-dropped"
                else wrong_gradient_culprit(compilation, violation.name) if violation.kind == "gradient-wrong-value"
                else first_form(compilation, violation))
        errors.append(culprit_error(
            compilation, violation, trace, site, fallback=fallback, known=step,
            context=f"the trace about to run ({describe_trace(trace)}{maker}) has a program where ",
        ))
    report_all(errors)


def _handover_culprit(compilation: compilations.Compilation) -> compilations.Step | None:
    """The step that broke the hand-over of the compilation's forward and backward (violation path only): from the
    first pair of traces that still hand over, the first later trace of either side that no longer hands over
    with the other side's trace of that pair."""
    fw, bw = compilation.handed_over
    if fw is None or bw is None:
        return None
    latest: dict[bool, TraceCtx] = {}
    baseline: dict[bool, TraceCtx] | None = None
    for step in compilation.steps:
        trace = step.ref()
        if trace is None or (trace.names is not fw.names and trace.names is not bw.names):
            continue
        backward = compilations.is_backward(trace)
        latest[backward] = trace
        if baseline is None:
            if len(latest) == 2 and not check_handover(latest[False], latest[True]):
                baseline = dict(latest)
            continue
        pair = (baseline[False], trace) if backward else (trace, baseline[True])
        if check_handover(*pair):
            return step
    return None


def _symbol_call_culprit(compilation: compilations.Compilation, about: TraceCtx, name: str) -> compilations.Step | None:
    """The step that added the symbol call ``symbols_called`` reports as ``name`` (violation path only): the first
    of the steps that lead to the trace ``about`` to run and all have it (before the executors are chosen every
    trace calls Thunder's symbols, but not this one, which a later step added)."""
    culprit = None
    for step in reversed(compilation.steps):
        trace = step.ref()
        if trace is None or trace.names is not about.names:
            continue
        if not any(v.name == name for v in symbols_called(trace)):
            break
        culprit = step
    return culprit


def _dropped_culprit(compilation: compilations.Compilation, name: str) -> compilations.Step | None:
    """The first step whose backward gives ``name`` no gradient (violation path only)."""
    fw, bw = compilation.handed_over
    if compilation.differentiates is None or fw is None or bw is None:
        return None
    for step in compilation.steps:
        trace = step.ref()
        if trace is not None and trace.names is bw.names and compilations.is_backward(trace) and any(
            v.name == name for v in dropped_gradients(compilation.differentiates, fw, trace, grad_enabled=True)
        ):
            return step
    return None


def _about_to_run(
    compilation: compilations.Compilation, trace: TraceCtx, function: Any, *, by_jit: bool
) -> list[Violation]:
    found: list[Violation] = []
    if compilations.checked_kind(trace):
        found = compilation.findings(trace, executed=True)[0]
    found += forms_about_to_run(compilation, trace, function if by_jit else None)
    if function is None:  # interpreted symbol by symbol: no program calls the symbols by their printed names
        found = [v for v in found if v.kind != "generated-code"]
        return found + _handover_about_to_run(compilation, trace)
    found += [
        Violation(
            "generated-code",
            name,
            f"the generated function {getattr(function, '__name__', '?')} reads {name}, which neither its "
            "context nor Python's builtins define: it would fail with NameError",
            describe_trace(trace),
        )
        for name in undefined_globals(function)
    ]
    if by_jit:
        found += untranslated_values(trace) + symbols_called(trace)
    found += _handover_about_to_run(compilation, trace, function if by_jit else None)
    return found


def _handover_about_to_run(
    compilation: compilations.Compilation, trace: TraceCtx, function: Any = None
) -> list[Violation]:
    """Once both the forward and the backward are about to run (as ``function``, when Thunder compiled it): what the
    one saves, the other must unpack, and the gradients they give."""
    side = side_of(compilation, trace)
    if side is None:
        return []
    compilation.running[side] = (trace, function)
    if len(compilation.running) < 2:
        return []
    (fw, fw_function), (bw, bw_function) = compilation.running["forward"], compilation.running["backward"]
    compilation.running.clear()
    compilation.handed_over = (fw, bw)
    found = check_forward_backward(fw, bw)
    if compilation.judges_gradients():  # a step after the split may have dropped a gradient
        found += dropped_gradients(compilation.differentiates, fw, bw, grad_enabled=compilation.grad_enabled)
        if not switched_off("gradient-wrong-value"):
            found += gradients_about_to_run(compilation, (fw, fw_function), (bw, bw_function),
                                            judged={v.name for v in found})
    return found


def _check_evaluated(trace: Any) -> None:
    compilation = compilations.current()
    if compilation is not None and isinstance(trace, TraceCtx):
        check_about_to_run(compilation, trace, None)


# A function thunder.jit traces may call eval_trace: the jit traces Thunder's evaluation, never this check.
opaque: Callable[[Callable[[Any], None]], Callable[[Any], None]] = make_opaque
check_interpreted = opaque(_check_evaluated)


_HOOKS: Final[dict[str, Callable[[Any], Any]]] = {
    "__init__": _make_init,
    "set_provenance": _make_set_provenance,
    "python_callable": _make_python_callable,
}


def hook_methods() -> None:
    """Replace the three methods on ``TraceCtx`` (once: a second call changes nothing)."""
    if replaced_methods:
        return
    for name, make in _HOOKS.items():
        original = TraceCtx.__dict__[name]
        replacement = make(original)
        replacement.__wrapped__ = original
        replacement.__doc__ = original.__doc__
        setattr(TraceCtx, name, replacement)
        replaced_methods.append((name, original))


def unhook_methods() -> None:
    """Put the original methods back."""
    while replaced_methods:
        name, original = replaced_methods.pop()
        setattr(TraceCtx, name, original)


def hooked_methods() -> list[str]:
    """The ``TraceCtx`` methods replaced now."""
    return [name for name, _ in replaced_methods]

