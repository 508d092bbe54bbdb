"""The read-only snapshot: a trace's state at a block's enter, to diff and restore at its exit.

Nothing is changed while the block runs (other readers in other threads or
tasks see the trace as it is). If names were added, the trace gets a fresh set
with its names at entry, and the set it had is left to whoever shares it: a
trace made inside the block with ``from_trace`` keeps every name it registered::

    >>> from thunder.core.trace import TraceCtx, from_trace
    >>> from safe_tracectx.context.readonly import Snapshot
    >>> trace = TraceCtx()
    >>> original = trace.names
    >>> snapshot = Snapshot(trace)
    >>> made_inside = from_trace(trace)
    >>> made_inside.add_name("t0")
    >>> snapshot.restore(trace)
    (['t0'], [])
    >>> sorted(trace.names), sorted(made_inside.names), made_inside.names is original
    ([], ['t0'], True)
"""

from __future__ import annotations

from typing import Any

from thunder.core.trace import TraceCtx

__all__ = ["Snapshot"]


class Snapshot:
    """A read-only trace's names, counters, bound symbols, scopes and object names at entry."""

    __slots__ = ("names", "names_copy", "counters", "bsyms", "bsyms_copy", "scopes", "scopes_copy", "objects")

    def __init__(self, trace: TraceCtx) -> None:
        self.names: set[str] = trace.names
        self.names_copy = set(self.names)
        self.counters = (trace.name_ctr, trace.obj_name_ctr)
        self.bsyms: list[Any] = trace._bound_symbols
        self.bsyms_copy = list(self.bsyms)
        self.scopes: list[Any] = trace.scopes
        self.scopes_copy = list(self.scopes)
        self.objects = dict(trace._object_ctx)

    def restore(self, trace: TraceCtx) -> tuple[list[str], list[Any]]:
        """Put ``trace`` back as it was; return the names and bound symbols that were added."""
        added_names = sorted((trace.names | self.names) - self.names_copy)
        known = {id(b) for b in self.bsyms_copy}
        added_bsyms = [b for b in trace.bound_symbols if id(b) not in known]
        if added_names or trace.names is not self.names:
            trace.names = set(self.names_copy)  # a fresh set: traces sharing the old one keep their names
        if added_names:
            trace.name_ctr, trace.obj_name_ctr = self.counters
        self.bsyms[:] = self.bsyms_copy
        self.scopes[:] = self.scopes_copy
        trace.scopes = self.scopes
        trace._bound_symbols = self.bsyms
        if trace._object_ctx != self.objects:
            trace._object_ctx.clear()
            trace._object_ctx.update(self.objects)
        return added_names, added_bsyms
