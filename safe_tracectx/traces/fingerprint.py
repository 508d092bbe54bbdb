"""A trace's fingerprint: per top-level bound symbol, its symbol, output names, shapes and dtypes.

Cheap (no trace text, no printing), JSON-ready, and enough to tell which pass's
output first defined a name::

    >>> from thunder.core.trace import TraceCtx
    >>> from safe_tracectx.traces.fingerprint import fingerprint
    >>> fingerprint(TraceCtx())
    []

Each entry is ``[symbol_name, [output names], [shape as a list, or None], [dtype as str, or None]]``.

What a recorded pass run keeps is :func:`packed_fingerprint`, the same as one JSON
text: a string is no work for the garbage collector, and a compile's runs keep
tens of thousands of rows (documents unpack it, ``auditlog.documents``)::

    >>> packed_fingerprint(TraceCtx())
    '[]'
"""

from __future__ import annotations

import json
from typing import Any, Final

from thunder.core.symbol import BoundSymbol

from safe_tracectx.traces.bound_proxies import proxy_outs

__all__ = ["fingerprint", "names_defined_by", "packed_fingerprint"]


def _shape(proxy: Any) -> list[Any] | None:
    shape = getattr(proxy, "_shape", None)
    if shape is None:
        return None
    try:
        return [s if isinstance(s, int | float | str | bool) else str(s) for s in shape]
    except TypeError:
        return None


def _dtype(proxy: Any) -> str | None:
    dtype = getattr(proxy, "_dtype", None)
    return None if dtype is None else str(dtype)


def _outs(bsym: Any) -> tuple[Any, ...]:
    # Duck-typed like the rest of this module: an entry that is not a bound symbol gives its flat_proxy_outs, if any.
    # Not `hasattr(bsym, "output")`: proxy_outs reads a BoundSymbol's __dict__ and, for an output it does not
    # walk, its flat_proxy_outs, which a look-alike with an `output` may lack (AttributeError).
    return proxy_outs(bsym) if isinstance(bsym, BoundSymbol) else tuple(getattr(bsym, "flat_proxy_outs", ()))


def _row(bsym: Any) -> list[Any]:
    outs = _outs(bsym)
    return [
        str(getattr(getattr(bsym, "sym", None), "name", "?")),
        [p.name for p in outs],
        [_shape(p) for p in outs],
        [_dtype(p) for p in outs],
    ]


def fingerprint(trace: Any) -> list[list[Any]]:
    """``[symbol_name, [names], [shapes], [dtypes]]`` per top-level bound symbol of ``trace``, in order."""
    return [_row(bsym) for bsym in getattr(trace, "bound_symbols", ())]


#: What is not JSON is written as its ``str``, as ``AuditLog.to_json`` writes it.
_encode: Final = json.JSONEncoder(separators=(",", ":"), default=str).encode


def packed_fingerprint(trace: Any) -> str:
    """``fingerprint(trace)`` as compact JSON text, made a row at a time (each row's lists are gone before the
    next is made: the whole fingerprint as lists would set off collections that see them all)."""
    return "[" + ",".join(_encode(_row(bsym)) for bsym in getattr(trace, "bound_symbols", ())) + "]"


def names_defined_by(trace: Any, *, skip_unpack: bool = False) -> frozenset[str]:
    """The output names of ``trace``'s top-level bound symbols (its own unpacking left out with ``skip_unpack``).

    (Pass hooks keep one per pass output; thousands of small lists per compile
    would make the garbage collector run more often.)::

        >>> from thunder.core.trace import TraceCtx
        >>> names_defined_by(TraceCtx())
        frozenset()
    """
    names: set[str] = set()
    for bsym in getattr(trace, "bound_symbols", ()):
        if skip_unpack and str(getattr(getattr(bsym, "sym", None), "name", "?")).startswith("unpack"):
            continue
        names.update(p.name for p in _outs(bsym))
    return frozenset(names)
