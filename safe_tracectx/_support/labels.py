"""How reports and messages name a trace: short, and the same for one trace across events.

A leaf module (it imports neither Thunder nor the rest of the package). The
package's own trace classes say what they are with a ``describe_as`` class
attribute::

    >>> from safe_tracectx._support.labels import describe_trace
    >>> describe_trace(None)
    'no trace'
    >>> class Scratch:
    ...     describe_as = "scratch trace"
    ...     fn = None
    ...     bound_symbols, names = [], set()
    >>> describe_trace(Scratch()).startswith("scratch trace @0x")
    True
"""

from __future__ import annotations

import weakref
from contextvars import Token

__all__ = ["describe_trace"]

#: The last trace described and its description: the audit describes the trace of every proxy made, and runs of
#: proxies share a trace. A weak reference, so that no trace is kept alive; a reused id is told apart by ``is``.
_last: tuple[weakref.ref[object], str] | None = None


def describe_trace(trace: object) -> str:
    """``trace of f @0x7f...`` (stable for one trace), or "no trace", or what the object is."""
    global _last
    if trace is None or trace is Token.MISSING:
        return "no trace"
    last = _last  # one read: another thread may replace it meanwhile
    if last is not None and last[0]() is trace:
        return last[1]
    described = _describe(trace)
    try:
        _last = (weakref.ref(trace), described)
    except TypeError:  # an object that takes no weak reference is described each time
        pass
    return described


def _describe(trace: object) -> str:
    if not (hasattr(trace, "bound_symbols") and hasattr(trace, "names")):
        return f"{type(trace).__name__} {trace!r:.60}"
    kind: str = getattr(type(trace), "describe_as", "trace")
    if getattr(type(trace), "describe_without_id", False):
        return kind
    fn = getattr(trace, "fn", None)
    name = getattr(fn, "__qualname__", None) or getattr(fn, "__name__", None)
    label = f" of {name}" if name else ""
    return f"{kind}{label} @{id(trace):#x}"
