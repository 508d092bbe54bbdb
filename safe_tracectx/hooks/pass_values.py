"""What a pass takes and returns: the traces in an argument or result, and the two sides of a pair.

    >>> from thunder.core.trace import TraceCtx
    >>> from safe_tracectx.hooks.pass_values import pair_sides, traces_in
    >>> fw, bw = TraceCtx(), TraceCtx()
    >>> traces_in([fw, (bw, 3)]) == [fw, bw] and pair_sides(((fw, None),)) == (fw, None)
    True
"""

from __future__ import annotations

from typing import Any

from thunder.core.trace import TraceCtx

__all__ = ["pair_sides", "traces_in"]


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
