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
from types import TracebackType
from typing import Any, Final, Generic, TypeVar

from thunder.core.trace import TraceCtx

from safe_tracectx._support.arguments import expect_trace
from safe_tracectx._support.callsite import find_call_site
from safe_tracectx._support.labels import describe_trace
from safe_tracectx.context.blocks import ENDED, NEW, OPEN, OWNER_VAR, TRACE_VAR, Block, not_initialised, require_initialised
from safe_tracectx.context.decorate import decorate
from safe_tracectx.context.readonly import Snapshot
from safe_tracectx.errors import FIXES, ReadOnlyTraceError, TraceContextError
from safe_tracectx.policy.actions import act

__all__ = ["preview", "tracectx"]

_T = TypeVar("_T", bound="TraceCtx | None")
_F = TypeVar("_F", bound=Callable[..., Any])

# Bound methods, looked up once: the enter/exit fast path is a handful of calls.
_trace_get: Final = TRACE_VAR.get
_trace_set: Final = TRACE_VAR.set
_trace_reset: Final = TRACE_VAR.reset
_owner_get: Final = OWNER_VAR.get
_owner_set: Final = OWNER_VAR.set
_owner_reset: Final = OWNER_VAR.reset


def preview(items: list[str], limit: int = 8) -> str:
    """The first ``limit`` items, comma-separated, and how many more."""
    shown = ", ".join(items[:limit])
    return shown + (f", ... ({len(items) - limit} more)" if len(items) > limit else "")


class tracectx(Block, Generic[_T]):
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

    __slots__ = ("_read_only", "_snapshot")  # _snapshot: set at enter, and only when read_only

    def __init__(self, trace: _T, *, read_only: bool = False) -> None:
        # Block.__init__, inlined (as in __enter__ and __exit__): these three run for every block.
        if trace is not None and not isinstance(trace, TraceCtx):
            expect_trace(trace, f"{type(self).__name__}()", allow_none=True)
        self._value = trace
        self._state = NEW
        self._read_only = True if read_only else False

    def __enter__(self) -> _T:
        trace: _T
        try:
            state, trace, read_only = self._state, self._value, self._read_only
        except AttributeError:  # a subclass whose __init__ skipped ours (or set only some of its fields)
            raise not_initialised(self) from None
        if state is not NEW:
            raise TypeError(
                f"this {type(self).__name__}() was already entered; create a new one for each "
                "with-block (or use it as a decorator, which makes one per call)"
            )
        if read_only:  # the snapshot before activating: if it raises, nothing changed
            self._snapshot = Snapshot(trace) if trace is not None else None
        self._value_token = _trace_set(trace)
        self._owner_token = _owner_set(self)
        self._state = OPEN
        return trace

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        # Block._deactivate_fast, inlined: this runs on every exit.
        try:
            state = self._state
        except AttributeError:  # never initialised (an ExitStack.push, a hand-called __exit__)
            raise not_initialised(self) from None
        if state is OPEN and _owner_get() is self and _trace_get(None) is self._value:
            try:
                _trace_reset(self._value_token)
            except ValueError:
                pass
            else:
                _owner_reset(self._owner_token)
                self._state = ENDED
                if self._read_only:
                    for error in self._on_closed():
                        act(error, in_flight=exc)
                return
        for error in self._close():
            act(error, in_flight=exc)

    def _on_closed(self) -> list[TraceContextError]:
        if not self._read_only:
            return []
        snapshot, self._snapshot = self._snapshot, None
        if snapshot is None:
            return []
        added_names, added_bsyms = snapshot.restore(self._value)
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
        return tracectx(self._value, read_only=self._read_only)

    def __call__(self, func: _F) -> _F:
        require_initialised(self, "_value", "_read_only")  # at decoration, not at the first call
        return decorate(func, self._clone, what=f"{type(self).__name__}(...)")
