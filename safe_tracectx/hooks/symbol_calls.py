"""A symbol called while no trace is active, said before Thunder's bare ``NotImplementedError``.

``Symbol.__call__`` records into the active trace and raises ``NotImplementedError``
("Attempting to execute symbol numel outside of a tracing context") when there is
none: a pass that evaluates ``x.numel`` of a proxy under symbolic values, where
``numel`` is a symbol (#2760). The hook is the ``get_tracectx`` that
``thunder.core.symbol`` alone reads (every other module keeps Thunder's): it
returns what Thunder's returns, and only when that is None for
``Symbol.__call__`` (which is about to raise) does it apply ``Policy.missing_trace``:
STRICT raises :class:`~safe_tracectx.errors.SymbolOutsideTraceError`, a
``NotImplementedError`` with Thunder's words first, naming the proxies the symbol
was given and the code that called it; AUDIT records it and Thunder raises its own.
With a trace active it also reads PyTorch's inference mode (one C call): a symbol called in
inference mode during a compilation is marked, ``torch.inference_mode()`` inside a jitted
function being what Thunder runs opaquely and records nothing of
(``grad_mode_requests.symbol_in_inference_mode``)::

    >>> import thunder.core.symbol as symbol
    >>> from safe_tracectx.hooks.symbol_calls import make_symbol_tracectx
    >>> make_symbol_tracectx(symbol.get_tracectx)() is None  # no trace active, not called by a symbol
    True
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from types import FrameType
from typing import Any, Final

import torch

from safe_tracectx._support.callsite import calling_code, find_call_site
from safe_tracectx._support.pass_catalog import step_label
from safe_tracectx.context.blocks import TRACE_VAR
from safe_tracectx.errors import TraceContextError
from safe_tracectx.hooks.grad_mode_requests import symbol_in_inference_mode
from safe_tracectx.hooks.reporting import internal_error
from safe_tracectx.hooks.runs import current_run
from safe_tracectx.policy.actions import act
from safe_tracectx.traces.violations import Violation

__all__ = ["make_symbol_tracectx"]

_trace_get: Final = TRACE_VAR.get
_inference_mode: Final = torch.is_inference_mode_enabled
#: The modules whose frames stand between the code that used a proxy and the symbol it called (a property such as
#: ``TensorProxy.numel`` resolves a method through the language context and calls its symbol, or its DTensor-aware
#: dispatch wrapper).
_MACHINERY: Final = frozenset({
    "thunder.core.symbol", "thunder.core.proxies", "thunder.core.langctxs", "thunder.core.langctx",
    "thunder.torch.experimental.dtensor_torch_and_prims",
})
#: The most argument items read for proxy names (a call with a million-element list stays cheap).
_MOST_ITEMS: Final = 10_000


def _caller(frame: FrameType | None) -> tuple[str, str] | None:
    """(label, ``module.qualname``) of the code that called the symbol, past the proxy and language-context
    machinery."""
    code = calling_code(frame, _MACHINERY)
    return None if code is None else (step_label(None, *code), code[0])


def _proxy_names(args: Any, kwargs: Any) -> list[str]:
    """The names of the proxies among the symbol's arguments, nested ones included (iteratively: any depth)."""
    from thunder.core.proxies import Proxy

    names: dict[str, None] = {}
    pending: list[Any] = [args, kwargs]
    seen = 0
    while pending and seen < _MOST_ITEMS:
        item = pending.pop()
        seen += 1
        if isinstance(item, Proxy):
            name = item.name
            if isinstance(name, str):
                names[name] = None
        elif isinstance(item, (tuple, list)):
            pending.extend(reversed(item))
        elif isinstance(item, dict):
            pending.extend(reversed(list(item.values())))
    return list(names)


def _called_outside_a_trace(frame: FrameType) -> None:
    """``frame`` is ``Symbol.__call__`` with no trace active: the policy's action, before Thunder raises."""
    from safe_tracectx.hooks import compilation as compilations

    try:
        error = _error(frame)
    except Exception as bug:  # noqa: BLE001 - a bug of ours (or a hostile proxy) never replaces Thunder's error
        internal_error("a symbol called with no trace active", bug)
        return
    compilation = compilations.current()
    if compilation is not None:  # once per compilation, symbol and caller: code that catches and retries says it once
        key = (error.kind or "", error.message)
        if key in compilation.reported:
            return
        compilation.reported.add(key)
    act(error)


def _error(frame: FrameType) -> TraceContextError:
    local = frame.f_locals
    name = str(getattr(local.get("self"), "name", "?"))
    names = _proxy_names(local.get("args", ()), local.get("kwargs", {}))
    caller = _caller(frame.f_back)
    run = current_run.get()
    given = f"on {', '.join(names)}" if names else "with no proxy arguments"
    by = f"{caller[1]} called it {given}" if caller is not None else f"it was called {given}"
    running = f", while {run.label} ({run.qualname}) runs" if run is not None else ""
    violation = Violation(
        "symbol-outside-trace", name,
        # Thunder's own words first: code that matches its message still matches ours
        f"Attempting to execute symbol {name} outside of a tracing context, which is not supported: {by}{running}; "
        "a symbol records into the active trace, and none is",
        f"the call of {name}", culprit=caller,
    )
    error = violation.to_error(find_call_site(skip_thunder=True))
    error.names = tuple(names)  # the proxies it was given (none: no names)
    return error


def make_symbol_tracectx(original: Callable[[], Any]) -> Callable[[], Any]:
    """The ``get_tracectx`` for ``thunder.core.symbol``: ``original``'s value; the policy first when a symbol's call
    finds no trace (that call raises NotImplementedError next)."""
    import thunder.core.trace as thunder_trace
    from thunder.core.symbol import Symbol

    call_code = Symbol.__call__.__code__

    def outside(depth: int = 2) -> None:
        try:
            caller = sys._getframe(depth)
        except ValueError:  # called with no Python frame above (a thread started on it)
            return
        if caller.f_code is call_code:
            _called_outside_a_trace(caller)

    if original is thunder_trace.get_tracectx:  # Thunder's own: read its ContextVar (the hot path)

        def get_tracectx() -> Any:
            trace = _trace_get(None)
            if trace is None:
                outside()
            elif _inference_mode():  # torch.inference_mode() in a jitted function, maybe
                symbol_in_inference_mode(trace, call_code)
            return trace

    else:  # another library's function in its place: called, as without us

        def get_tracectx() -> Any:
            trace = original()
            if trace is None:
                outside()
            elif _inference_mode():
                symbol_in_inference_mode(trace, call_code)
            return trace

    get_tracectx.__wrapped__ = original  # type: ignore[attr-defined]
    get_tracectx.__doc__ = original.__doc__
    return get_tracectx
