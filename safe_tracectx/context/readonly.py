"""The read-only snapshot: a trace's state at a block's enter, to diff and restore at its exit.

Inside the block the trace names into a working copy of its ``names`` set, so
a trace made there with ``from_trace`` (which shares ``names``) keeps every
name it registered, while the read-only trace gets its own set back, unchanged::

    >>> from thunder.core.trace import TraceCtx, from_trace
    >>> from safe_tracectx.context.readonly import Snapshot
    >>> trace = TraceCtx()
    >>> original = trace.names
    >>> snapshot = Snapshot(trace)
    >>> made_inside = from_trace(trace)
    >>> made_inside.add_name("t0")
    >>> snapshot.restore(trace)
    (['t0'], [])
    >>> trace.names is original, sorted(trace.names), sorted(made_inside.names)
    (True, [], ['t0'])
"""

from __future__ import annotations

from typing import Any

from thunder.core.trace import TraceCtx

__all__ = ["Snapshot"]


class Snapshot:
    """A read-only trace's names, counters, bound symbols, scopes and object names at entry."""

    __slots__ = ("names", "names_copy", "working", "counters", "bsyms", "bsyms_copy", "scopes", "scopes_copy", "objects")

    def __init__(self, trace: TraceCtx) -> None:
        self.names: set[str] = trace.names
        self.names_copy = set(self.names)
        self.counters = (trace.name_ctr, trace.obj_name_ctr)
        self.bsyms: list[Any] = trace._bound_symbols
        self.bsyms_copy = list(self.bsyms)
        self.scopes: list[Any] = trace.scopes
        self.scopes_copy = list(self.scopes)
        self.objects = dict(trace._object_ctx)
        self.working = set(self.names_copy)
        trace.names = self.working  # last: nothing above can fail after the trace was touched

    def restore(self, trace: TraceCtx) -> tuple[list[str], list[Any]]:
        """Put ``trace`` back as it was; return the names and bound symbols that were added."""
        added_names = sorted((trace.names | self.working | self.names) - self.names_copy)
        known = {id(b) for b in self.bsyms_copy}
        added_bsyms = [b for b in trace.bound_symbols if id(b) not in known]
        if len(self.names) != len(self.names_copy) or self.names != self.names_copy:
            self.names.clear()  # changed through a trace that shared it before the block
            self.names.update(self.names_copy)
        trace.names = self.names
        trace.name_ctr, trace.obj_name_ctr = self.counters
        self.bsyms[:] = self.bsyms_copy
        self.scopes[:] = self.scopes_copy
        trace.scopes = self.scopes
        trace._bound_symbols = self.bsyms
        if trace._object_ctx != self.objects:
            trace._object_ctx.clear()
            trace._object_ctx.update(self.objects)
        return added_names, added_bsyms
