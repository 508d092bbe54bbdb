"""One compilation's forward/backward pair as passes hand it on, and the pass that introduced a clash.

The interpretation pass starts a :class:`Compilation` in the thread; the split (or
any pass returning a pair) sets the pair; each later pass whose role is forward
or backward replaces its side. The names each pass output defines are kept in the
history, so the first pass whose output made a clash is found without re-running::

    >>> from safe_tracectx.hooks.pairs import Compilation
    >>> c = Compilation()
    >>> c.history.append(("split", "split", frozenset({"t0"}), frozenset({"t1"})))
    >>> c.history.append(("MyTransform.transform_trace_post_optimization", "my", None, frozenset({"t0"})))
    >>> c.culprit("t0")
    ('MyTransform.transform_trace_post_optimization', 'my')
"""

from __future__ import annotations

import threading
import weakref
from typing import Any


__all__ = ["Compilation", "current", "is_backward", "signature_name", "start"]

_local = threading.local()

#: (label, qualname, names the forward defines or None, names the backward defines - its own unpacking
#: left out - or None) per pass output (``fingerprint.names_defined_by``).
HistoryEntry = tuple[str, str, frozenset[str] | None, frozenset[str] | None]


class Compilation:
    """What the passes of one ``thunder.jit`` compilation in this thread produced so far."""

    __slots__ = ("forward", "backward", "clashes", "reported", "traces", "history", "_names")

    def __init__(self) -> None:
        self.forward: Any = None
        self.backward: Any = None
        #: Forward/backward clash names already reported (a later pass does not report them again).
        self.clashes: set[str] = set()
        #: (violation kind, name) already reported by check_trace on an earlier pass's output.
        self.reported: set[tuple[str, str]] = set()
        #: Every trace a pass read or returned (a proxy named by one of them elsewhere borrowed its namer).
        self.traces: weakref.WeakSet[Any] = weakref.WeakSet()
        self.history: list[HistoryEntry] = []
        #: The ``names`` sets of those traces (``from_trace`` shares them): a trace derived from one belongs here.
        self._names: dict[int, Any] = {}

    def add(self, trace: Any) -> None:
        """``trace`` is one of this compilation's."""
        self.traces.add(trace)
        names = getattr(trace, "names", None)
        if names is not None:
            self._names[id(names)] = names

    def owns(self, trace: Any) -> bool:
        """True for a trace a pass of this compilation read or returned, or one derived from it."""
        return trace in self.traces or id(getattr(trace, "names", None)) in self._names

    def role_of(self, trace: Any) -> str | None:
        """``backward`` for a backward trace; ``forward`` for another one once the pair exists; else None."""
        if is_backward(trace):
            return "backward"
        return "forward" if self.backward is not None else None

    def culprit(self, name: str) -> tuple[str, str]:
        """(label, qualname) of the first pass after whose output both sides define ``name``."""
        forward: frozenset[str] = frozenset()
        backward: frozenset[str] = frozenset()
        for label, qualname, fw, bw in self.history:
            if fw is not None:
                forward = fw
            if bw is not None:
                backward = bw
            if name in forward and name in backward:
                return label, qualname
        return ("?", "?") if not self.history else self.history[-1][:2]


def signature_name(trace: Any) -> str | None:
    """The name of the function a trace defines (``computation``, ``backward_fn``, ``prologue``, ...), if known."""
    try:
        return str(trace.siginfo().name)
    except Exception:  # noqa: BLE001 - a trace without a signature yet
        return None


def is_backward(trace: Any) -> bool:
    """True for a trace whose function is Thunder's ``backward_fn``."""
    return signature_name(trace) == "backward_fn"


def start() -> Compilation:
    """A new compilation in this thread (the interpretation pass begins)."""
    compilation = Compilation()
    _local.compilation = compilation
    return compilation


def current() -> Compilation | None:
    """The compilation running in this thread, if a pass started one."""
    found: Compilation | None = getattr(_local, "compilation", None)
    return found
