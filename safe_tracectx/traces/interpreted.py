"""What a trace evaluated symbol by symbol hands back: a tensor it returns that its interpretation bound to None.

``interpret_trace`` calls each bound symbol's symbol and binds the bound
symbol's outputs to what the call returned. A bound symbol that names an output
its symbol does not return (a pass gave ``ltorch.setitem_``'s bound symbol the
output ``t5``, while ``setitem_`` returns None: #2397) binds ``t5`` to None, and
the trace returns None where it says a tensor::

    >>> from thunder.core.devices import cpu
    >>> from thunder.core.dtypes import float32
    >>> from thunder.core.prims import python_return
    >>> from thunder.core.proxies import TensorProxy
    >>> from thunder.core.trace import TraceCtx, tracectx
    >>> trace = TraceCtx()
    >>> with tracectx(trace):
    ...     t5 = TensorProxy("t5", shape=(2,), device=cpu, dtype=float32)
    >>> trace.bound_symbols = [python_return.bind(t5, output=None)]
    >>> [v.name for v in unbound_returned_tensors(trace, {"t5": None})]
    ['t5']
"""

from __future__ import annotations

from typing import Any

from thunder.core.proxies import TensorProxy
from thunder.core.pytree import tree_flatten

from safe_tracectx._support.labels import describe_trace
from safe_tracectx.traces.bound_proxies import proxy_outs
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


def unbound_returned_tensors(trace: Any, env: dict[Any, Any]) -> list[Violation]:
    """The tensors ``trace`` returns that its interpretation (``env``: name to value) bound to None."""
    try:
        output = trace.output
    except Exception:  # noqa: BLE001 - no return (Thunder asserts one): the interpretation returned nothing either
        return []
    flat, _ = tree_flatten(output)  # type: ignore[no-untyped-call]
    found: list[Violation] = []
    returned = {p.name: p for p in reversed(flat) if isinstance(p, TensorProxy)}  # proxies are not hashable
    for proxy in reversed(returned.values()):
        known, value = _value(env, proxy.name)
        if not known or value is not None:
            continue
        made = [(i, b) for i, b in enumerate(trace.bound_symbols) if any(o.name == proxy.name for o in proxy_outs(b))]
        if made:
            index, bsym = made[-1]
            by = (
                f"{bsym_label(index, bsym)} names {proxy.name} as its output, but calling "
                f"{getattr(bsym.sym, 'name', '?')} returned None for it"
            )
        else:
            by = f"nothing bound {proxy.name} to a value"
        found.append(Violation(
            "unreturned-output", proxy.name,
            f"interpreting {describe_trace(trace)} bound {proxy.name} to None: {by}, and the trace returns "
            f"{proxy.name}, so its caller gets None where the trace says a tensor",
            describe_trace(trace),
        ))
    return found
