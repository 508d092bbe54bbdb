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
was given and the code that called it; AUDIT records it and Thunder raises its own::

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

from safe_tracectx._support.callsite import find_call_site
from safe_tracectx._support.pass_catalog import step_label
from safe_tracectx.context.blocks import TRACE_VAR
from safe_tracectx.hooks.runs import current_run
from safe_tracectx.policy.actions import act
from safe_tracectx.traces.violations import Violation

__all__ = ["make_symbol_tracectx"]

_trace_get: Final = TRACE_VAR.get
#: The modules whose frames stand between the code that used a proxy and the symbol it called (a property such as
#: ``TensorProxy.numel`` resolves a method through the language context and calls its symbol).
_MACHINERY: Final = ("thunder.core.symbol", "thunder.core.proxies", "thunder.core.langctxs", "thunder.core.langctx")


def _caller(frame: FrameType | None) -> tuple[str, str] | None:
    """(label, ``module.qualname``) of the code that called the symbol, past the proxy and language-context
    machinery."""
    while frame is not None:
        module = str(frame.f_globals.get("__name__", "?"))
        if module not in _MACHINERY and not module.startswith("safe_tracectx"):
            qualname = f"{module}.{frame.f_code.co_qualname}"
            return step_label(None, qualname, frame.f_code.co_qualname), qualname
        frame = frame.f_back
    return None


def _proxy_names(args: Any, kwargs: Any) -> list[str]:
    from thunder.core.proxies import Proxy
    from thunder.core.pytree import tree_flatten

    try:
        flat, _ = tree_flatten((args, kwargs))  # type: ignore[no-untyped-call]
    except Exception:  # noqa: BLE001 - an argument pytree cannot flatten: Thunder's error comes next anyway
        flat = [*args, *kwargs.values()] if isinstance(args, tuple) and isinstance(kwargs, dict) else []
    return list(dict.fromkeys(p.name for p in flat if isinstance(p, Proxy)))


def _called_outside_a_trace(frame: FrameType) -> None:
    """``frame`` is ``Symbol.__call__`` with no trace active: the policy's action, before Thunder raises."""
    local = frame.f_locals
    symbol = local.get("self")
    name = str(getattr(symbol, "name", "?"))
    names = _proxy_names(local.get("args", ()), local.get("kwargs", {}))
    caller = _caller(frame.f_back)
    run = current_run.get()
    given = f"on {', '.join(names)}" if names else "with no proxy arguments"
    by = f"{caller[1]} called it {given}" if caller is not None else f"it was called {given}"
    running = f", while {run.label} ({run.qualname}) runs" if run is not None else ""
    violation = Violation(
        "symbol-outside-trace", names[0] if names else name,
        # Thunder's own words first: code that matches its message still matches ours
        f"Attempting to execute symbol {name} outside of a tracing context, which is not supported: {by}{running}; "
        "a symbol records into the active trace, and none is",
        f"the call of {name}", also=tuple(names[1:]),
        culprit=caller,
    )
    act(violation.to_error(find_call_site(skip_thunder=True)))


def make_symbol_tracectx(original: Callable[[], Any]) -> Callable[[], Any]:
    """The ``get_tracectx`` for ``thunder.core.symbol``: Thunder's value; the policy first when a symbol's call
    finds no trace (that call raises NotImplementedError next)."""
    from thunder.core.symbol import Symbol

    call_code = Symbol.__call__.__code__

    def get_tracectx() -> Any:
        trace = _trace_get(None)
        if trace is None and sys._getframe(1).f_code is call_code:
            _called_outside_a_trace(sys._getframe(1))
        return trace

    get_tracectx.__wrapped__ = original  # type: ignore[attr-defined]
    get_tracectx.__doc__ = original.__doc__
    return get_tracectx
