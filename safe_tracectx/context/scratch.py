"""``scratch_trace``: a fresh trace used only as a namer; the traces it avoids are never modified.

    >>> from thunder.core.trace import TraceCtx
    >>> from safe_tracectx import scratch_trace
    >>> fw, bw = TraceCtx(), TraceCtx()
    >>> fw.names.add("t0")
    >>> with scratch_trace(fw, bw, names=["t1"]) as scratch:
    ...     scratch.make_name(prefix="t")
    't2'
    >>> sorted(fw.names), sorted(bw.names)
    (['t0'], [])
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, ClassVar, Final

from thunder.core.trace import TraceCtx

from safe_tracectx._support.arguments import expect_trace
from safe_tracectx._support.callsite import find_call_site
from safe_tracectx._support.labels import describe_trace
from safe_tracectx.context.active_trace import preview, tracectx
from safe_tracectx.errors import NameClashError

__all__ = ["ScratchTrace", "scratch_trace"]

_NO_NAMES: Final[tuple[str, ...]] = ()


def _name_tuple(names: Iterable[str]) -> tuple[str, ...]:
    """``names=`` as a tuple of str, or a TypeError that names what was passed."""
    if isinstance(names, str):
        raise TypeError(
            f"scratch_trace(names=...) takes an iterable of names, got str ({names!r:.60}); write names=[{names!r:.40}]"
        )
    try:
        result = tuple(names)
    except TypeError:
        raise TypeError(
            f"scratch_trace(names=...) takes an iterable of names, got {type(names).__name__} ({names!r:.60})"
        ) from None
    for name in result:
        if not isinstance(name, str):
            raise TypeError(f"scratch_trace(names=...) items must be str, got {type(name).__name__} ({name!r:.60})")
    return result


class ScratchTrace(TraceCtx):
    """A fresh, empty trace used as a namer; its names avoid the reserved ones.

    ``created_names`` lists the names it handed out, and ``commit_names(into=trace)``
    registers them in a destination trace.
    """

    describe_as: ClassVar[str] = "scratch trace"

    def __init__(self, reserved: Iterable[str] = ()) -> None:
        super().__init__(None)
        self.names = set(reserved)
        self._created: list[str] = []

    @classmethod
    def _owning(cls, names: set[str]) -> ScratchTrace:
        """A scratch trace that takes ``names`` (a set nobody else holds) without copying it."""
        trace = cls.__new__(cls)
        TraceCtx.__init__(trace, None)
        trace.names = names
        trace._created = []
        return trace

    @property
    def created_names(self) -> tuple[str, ...]:
        """The names this scratch trace handed out, in order."""
        return tuple(self._created)

    def add_name(self, name: str) -> None:
        super().add_name(name)
        self._created.append(name)

    def _make_name(self, *, prefix: str | None = None, is_object_name: bool = False, obj: Any | None = None) -> str:
        name: str = super()._make_name(prefix=prefix, is_object_name=is_object_name, obj=obj)
        if not is_object_name:
            self._created.append(name)
        return name

    def commit_names(self, *, into: TraceCtx) -> tuple[str, ...]:
        """Register every created name in ``into``; raise NameClashError (changing nothing) if one is taken."""
        expect_trace(into, "commit_names(into=...)")
        taken = [name for name in self._created if name in into.names]
        if taken:
            raise NameClashError(
                f"cannot commit scratch names into {describe_trace(into)}: "
                f"{preview(taken)} already taken there; nothing was committed",
                fix="reserve the destination when naming: `with scratch_trace(destination, ...)`",
                site=find_call_site(),
            )
        into.names.update(self._created)
        return tuple(self._created)


class scratch_trace(tracectx[ScratchTrace]):
    """Make a fresh :class:`ScratchTrace` active; its names avoid ``reserve`` traces and ``names``.

    The reserve traces are never modified (their ``names`` sets are copied).
    """

    __slots__ = ("_reserve", "_reserved_names")

    def __init__(self, *reserve: TraceCtx, names: Iterable[str] = _NO_NAMES) -> None:
        reserved: set[str] = set()
        if reserve:
            for position, trace in enumerate(reserve):
                where = f"scratch_trace() reserve argument {position}"
                reserved |= expect_trace(trace, where, verb="must be", hint="to reserve plain names use names=[...]").names
        reserved_names: tuple[str, ...] = _NO_NAMES
        if names is not _NO_NAMES:
            reserved_names = _name_tuple(names)
            reserved.update(reserved_names)
        tracectx.__init__(self, ScratchTrace._owning(reserved))
        self._reserve = reserve
        self._reserved_names = reserved_names

    def _clone(self) -> scratch_trace:
        return scratch_trace(*self._reserve, names=self._reserved_names)
