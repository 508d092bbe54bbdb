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

#: The last trace described, its ``fn`` then, and its description: the audit describes the trace of every proxy
#: made, and runs of proxies share a trace. A weak reference, so that no trace is kept alive; a reused id is told
#: apart by ``is``, a trace given another ``fn`` by its ``fn``.
_last: tuple[weakref.ref[object], object, str] | None = None


def describe_trace(trace: object) -> str:
    """``trace of f @0x7f...`` (stable for one trace), or "no trace", or what the object is."""
    global _last
    if trace is None or trace is Token.MISSING:
        return "no trace"
    if not (hasattr(trace, "bound_symbols") and hasattr(trace, "names")):
        return f"{type(trace).__name__} {trace!r:.60}"  # not a trace: described each time (its repr may change)
    fn = getattr(trace, "fn", None)
    last = _last  # one read: another thread may replace it meanwhile
    if last is not None and last[0]() is trace and last[1] is fn:
        return last[2]
    described = _describe(trace, fn)
    try:
        _last = (weakref.ref(trace), fn, described)
    except TypeError:  # an object that takes no weak reference is described each time
        pass
    return described


def _describe(trace: object, fn: object) -> str:
    kind: str = getattr(type(trace), "describe_as", "trace")
    if getattr(type(trace), "describe_without_id", False):
        return kind
    name = getattr(fn, "__qualname__", None) or getattr(fn, "__name__", None)
    label = f" of {name}" if name else ""
    return f"{kind}{label} @{id(trace):#x}"
