"""``interpret_trace``, which evaluates a trace symbol by symbol: checked before it runs, and what it returns.

The trace is checked as a program that runs as it is (``steps.check_about_to_run``)
before Thunder evaluates it. ``interpret_trace`` is asked for its environment
too (and returns what its caller asked for): a tensor the trace returns that the
interpretation bound to None is reported before the caller reads it::

    >>> import thunder.core.trace_interpreter as interpreter
    >>> from safe_tracectx.hooks.interpretation import make_interpreter_hook
    >>> make_interpreter_hook(interpreter.interpret_trace).__name__
    'interpret_trace'
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any

from thunder.core.interpreter import is_jitting
from thunder.core.trace import TraceCtx

from safe_tracectx._support.callsite import find_call_site
from safe_tracectx._support.labels import describe_trace
from safe_tracectx.hooks import compilation as compilations
from safe_tracectx.hooks.reporting import culprit_error, report_all
from safe_tracectx.hooks.steps import check_interpreted, new_findings, opaque, replaced_methods
from safe_tracectx.traces.interpreted import unbound_returned_tensors

__all__ = ["make_interpreter_hook"]


def _parameters(function: Callable[..., Any]) -> tuple[str, ...]:
    try:
        return tuple(inspect.signature(function).parameters)
    except (TypeError, ValueError):
        return ()


def _check_values(trace: Any, env: dict[Any, Any]) -> None:
    """What ``interpret_trace`` bound the names ``trace`` returns to: a tensor it returns bound to None."""
    compilation = compilations.current()
    if compilation is None or not isinstance(trace, TraceCtx):
        return
    new = new_findings(compilation, f"what interpreting {describe_trace(trace)} returns",
                        lambda: unbound_returned_tensors(trace, env))
    if not new:
        return
    made = compilation.step_of(trace)  # the pass or step that made the trace, said in the message
    fallback = ("interpretation", "thunder.core.trace_interpreter.interpret_trace")
    site = find_call_site(skip_thunder=True)
    report_all([culprit_error(compilation, v, trace, site, fallback=fallback, known=made, context="")
                for v in new])


def _check_interpretation(done: tuple[Any, dict[Any, Any]]) -> None:
    _check_values(*done)


_check_interpreted_values = opaque(_check_interpretation)


def make_interpreter_hook(original: Callable[..., Any]) -> Callable[..., Any]:
    """``interpret_trace``/``interpret_trace_to_trace``, which evaluate a trace symbol by symbol: the trace is about
    to run, and is checked as a program that runs as it is, before Thunder evaluates it. ``interpret_trace`` is
    asked for its environment too (and returns what it was asked for): a tensor the trace returns that the
    interpretation bound to None is reported before the caller reads it."""
    if getattr(original, "__name__", "") != "interpret_trace" or "with_env" not in _parameters(original):

        def interpret(trace: Any, *args: Any, **kwargs: Any) -> Any:
            check_interpreted(trace)
            return original(trace, *args, **kwargs)

    else:

        def interpret(trace: Any, *args: Any, **kwargs: Any) -> Any:
            check_interpreted(trace)
            # Only Python's own run of the trace is watched: under thunder.jit's interpreter (autocast traces a call
            # of it) this function's code runs interpreted, and what it reads changes which names Thunder gives (a
            # closure's cell did); with a symbol_mapper another function than the symbol runs; once uninstalled (a
            # grad rule Thunder cached holds this function) nothing is
            mapped = kwargs.get("symbol_mapper") is not None
            if not replaced_methods or mapped or is_jitting():  # type: ignore[no-untyped-call]
                return original(trace, *args, **kwargs)
            asked = kwargs.pop("with_env", False)
            result, env = original(trace, *args, with_env=True, **kwargs)
            _check_interpreted_values((trace, env))
            return (result, env) if asked else result

    interpret.__wrapped__ = original  # type: ignore[attr-defined]
    interpret.__doc__ = original.__doc__
    interpret.__name__ = getattr(original, "__name__", "interpret_trace")
    return interpret
