"""What a trace evaluated symbol by symbol hands back: a tensor it returns that its interpretation bound to None.

``interpret_trace`` calls each bound symbol's symbol and binds the bound
symbol's outputs to what the call returned. A bound symbol that names an output
its symbol does not return (a pass gave ``ltorch.setitem_``'s bound symbol the
output ``t5``, while ``setitem_`` returns None: #2397) binds ``t5`` to None, and
the trace returns None where it says a tensor. What the caller gave as None (an
input: a VJP hands None for the gradient of an unused output) is the caller's::

    >>> from thunder.core.devices import cpu
    >>> from thunder.core.dtypes import float32
    >>> from thunder.core.prims import neg, python_return
    >>> from thunder.core.proxies import TensorProxy
    >>> from thunder.core.trace import TraceCtx, tracectx
    >>> trace = TraceCtx()
    >>> with tracectx(trace):
    ...     a = TensorProxy("a", shape=(2,), device=cpu, dtype=float32)
    ...     t5 = TensorProxy("t5", shape=(2,), device=cpu, dtype=float32)
    >>> trace.args = (a,)
    >>> trace.bound_symbols = [neg.bind(a, output=t5), python_return.bind(t5, output=None)]
    >>> [v.name for v in unbound_returned_tensors(trace, {"a": None, "t5": None})]
    ['t5']
"""

from __future__ import annotations

from typing import Any

from thunder.core.proxies import TensorProxy
from thunder.core.pytree import tree_flatten

from safe_tracectx._support.labels import describe_trace
from safe_tracectx.traces.bound_proxies import proxy_outs
from safe_tracectx.traces.returns import return_symbol, return_value
from safe_tracectx.traces.violations import Violation, bsym_label

__all__ = ["unbound_returned_tensors"]


def _value(env: dict[Any, Any], name: str) -> tuple[bool, Any]:
    """(found, value) of ``name`` in an interpretation's environment (keyed by name; by variable in some versions)."""
    if name in env:
        return True, env[name]
    for key, value in env.items():
        if getattr(key, "name", None) == name:
            return True, value
    return False, None


def _made_by(trace: Any, name: str) -> tuple[int, Any] | None:
    """The last bound symbol the interpretation ran whose outputs include ``name`` (None: the caller gave it, as a
    trace input or through a symbol the interpreter skips, an unpacking)."""
    from thunder.core.trace_interpreter import trace_interpreter_skip_list

    inputs, _ = tree_flatten((trace.args, trace.kwargs))  # type: ignore[no-untyped-call]
    if any(getattr(p, "name", None) == name for p in inputs):
        return None
    for index in range(len(trace.bound_symbols) - 1, -1, -1):
        bsym = trace.bound_symbols[index]
        if any(o.name == name for o in proxy_outs(bsym)):
            return None if bsym.sym.id in trace_interpreter_skip_list else (index, bsym)
    return None


def unbound_returned_tensors(trace: Any, env: dict[Any, Any]) -> list[Violation]:
    """The tensors ``trace`` returns that its interpretation (``env``: name to value) bound to None."""
    if return_symbol(trace) is None:  # no return (Thunder asserts one): the interpretation returned nothing either
        return []
    flat, _ = tree_flatten(return_value(trace))  # type: ignore[no-untyped-call]
    found: list[Violation] = []
    returned = {p.name: p for p in reversed(flat) if isinstance(p, TensorProxy)}  # proxies are not hashable
    for proxy in reversed(returned.values()):
        known, value = _value(env, proxy.name)
        if not known or value is not None:
            continue
        made = _made_by(trace, proxy.name)
        if made is None:  # an input the caller gave as None (a VJP's gradient of an unused output), or skipped
            continue
        index, bsym = made
        by = (
            f"{bsym_label(index, bsym)} names {proxy.name} as its output, but calling "
            f"{getattr(bsym.sym, 'name', '?')} returned None for it"
        )
        found.append(Violation(
            "unreturned-output", proxy.name,
            f"interpreting {describe_trace(trace)} bound {proxy.name} to None: {by}, and the trace returns "
            f"{proxy.name}, so its caller gets None where the trace says a tensor",
            describe_trace(trace),
        ))
    return found
