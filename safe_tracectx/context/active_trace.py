"""``tracectx``: make a trace active for a block, restored on every exit path.

    >>> from thunder.core.trace import TraceCtx, get_tracectx
    >>> from safe_tracectx import tracectx
    >>> trace = TraceCtx()
    >>> with tracectx(trace) as active:
    ...     get_tracectx() is trace is active
    True
    >>> get_tracectx() is None
    True
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, ClassVar, TypeVar

from thunder.core.trace import TraceCtx

from safe_tracectx._support.arguments import expect_trace
from safe_tracectx._support.callsite import find_call_site
from safe_tracectx._support.labels import describe_trace
from safe_tracectx.context.blocks import NEW, Block, require_initialised
from safe_tracectx.context.decorate import decorate
from safe_tracectx.context.readonly import Snapshot
from safe_tracectx.errors import FIXES, ReadOnlyTraceError, TraceContextError

__all__ = ["preview", "tracectx"]

_T = TypeVar("_T", bound="TraceCtx | None")
_F = TypeVar("_F", bound=Callable[..., Any])


def preview(items: list[str], limit: int = 8) -> str:
    """The first ``limit`` items, comma-separated, and how many more."""
    shown = ", ".join(items[:limit])
    return shown + (f", ... ({len(items) - limit} more)" if len(items) > limit else "")


class tracectx(Block[_T]):
    """Make ``trace`` (a ``TraceCtx``, or None for "explicitly no trace") the active trace.

    Restores the previous trace on every exit path. Also a decorator (a fresh
    block per call, or per resumption of a generator or coroutine). With
    ``read_only=True``, names or bound symbols added to ``trace`` inside the
    block are a violation (``Policy.read_only``) and are removed again at exit::

        >>> from thunder.core.trace import TraceCtx
        >>> from safe_tracectx import tracectx, use_policy
        >>> trace = TraceCtx()
        >>> with use_policy("strict", read_only="ignore"):
        ...     with tracectx(trace, read_only=True):
        ...         _ = trace.make_name()
        >>> len(trace.names)
        0
    """

    __slots__ = ("_snapshot",)  # set at enter, and only when read-only

    set_at_enter: ClassVar[frozenset[str]] = Block.set_at_enter | {"_snapshot"}

    def __init__(self, trace: _T, *, read_only: bool = False) -> None:
        if trace is not None and not isinstance(trace, TraceCtx):
            expect_trace(trace, f"{type(self).__name__}()", allow_none=True)
        # Block.__init__'s three fields, set here rather than by calling it: this runs for every block.
        self._value = trace
        self._state = NEW
        self._snapshots = True if read_only else False

    def _take_snapshot(self) -> None:
        self._snapshot = Snapshot(self._value) if self._value is not None else None

    def _on_closed(self) -> list[TraceContextError]:
        if not self._snapshots:
            return []
        snapshot, self._snapshot = self._snapshot, None
        trace = self._value
        if snapshot is None or trace is None:  # no snapshot of no trace
            return []
        added_names, added_bsyms = snapshot.restore(trace)
        if not added_names and not added_bsyms:
            return []
        parts = []
        if added_names:
            parts.append(f"{len(added_names)} name(s) ({preview(added_names)})")
        if added_bsyms:
            syms = [str(getattr(getattr(b, "sym", None), "name", b)) for b in added_bsyms]
            parts.append(f"{len(added_bsyms)} bound symbol(s) ({preview(syms)})")
        message = (
            f"read-only {describe_trace(self._value)} was modified inside "
            f"`with tracectx(trace, read_only=True)`: {' and '.join(parts)} were added; "
            "the trace was restored to its state at entry"
        )
        return [ReadOnlyTraceError(message, fix=FIXES["read_only"], site=find_call_site())]

    def _clone(self) -> tracectx[_T]:
        return tracectx(self._value, read_only=self._snapshots)

    def __call__(self, func: _F) -> _F:
        require_initialised(self, "_value", "_snapshots")  # at decoration, not at the first call
        return decorate(func, self._clone, what=f"{type(self).__name__}(...)")
