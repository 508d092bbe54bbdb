"""One step of a compilation: the trace it made, who made it, who named it, inside which pass.

A trace made by a pass's own helper names the pass it ran inside, so a report charged to
it says both::

    >>> from thunder.core.trace import TraceCtx
    >>> from safe_tracectx.hooks.step_record import Step
    >>> trace = TraceCtx()
    >>> Step(trace, "functionalization", "m.helper", "functionalization", "m.functionalize").culprit
    ('functionalization', 'm.helper, inside m.functionalize')
"""

from __future__ import annotations

import weakref
from typing import Any

__all__ = ["Step"]


class Step:
    """A trace one step of the compilation made: who made it, who named it (its provenance), inside which pass."""

    __slots__ = ("ref", "label", "maker", "namer", "within", "pass_function")

    def __init__(self, trace: Any, label: str, maker: str, within: str | None, pass_function: str | None = None) -> None:
        self.ref = weakref.ref(trace)
        self.label = label
        #: The function that made the trace; the one that gave it its provenance, if another.
        self.maker = maker
        self.namer: str | None = None
        #: The label of the pass running when it was made, and that pass's function.
        self.within = within
        self.pass_function = pass_function

    @property
    def qualname(self) -> str:
        """The maker (and namer), and the pass it ran inside when that is another function (a pass's helper)."""
        made = self.maker if self.namer in (None, self.maker) else f"{self.maker}, named by {self.namer}"
        function = self.pass_function
        inside = function is not None and all(function.rsplit(".", 1)[-1] != (f or "").rsplit(".", 1)[-1]
                                              for f in (self.maker, self.namer))  # one function, re-exported
        return f"{made}, inside {function}" if inside else made

    @property
    def culprit(self) -> tuple[str, str]:
        """(label, qualname) as reports name the culprit."""
        return self.label, self.qualname

    def describe(self) -> str:
        inside = f", inside {self.within}" if self.within and self.within != self.label else ""
        return f"{self.label} ({self.qualname}){inside}"
