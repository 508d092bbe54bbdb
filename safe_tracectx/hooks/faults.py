"""Injection points for ``safe-tracectx sweep``: each ``set_tracectx``, proxy creation and pass entry.

While an :class:`Injector` is armed (``arm()``), every hooked point counts
itself; a counting injector (``target=None``) records each point's kind and
pass, an injecting one raises :class:`InjectedFault` at point number ``target``::

    >>> from safe_tracectx.hooks import faults
    >>> injector = faults.arm(faults.Injector(target=1))
    >>> faults.point("set", None)
    >>> try:
    ...     faults.point("proxy", "fusion remat")
    ... except faults.InjectedFault as fault:
    ...     print(fault)
    injected fault at point 1 (proxy creation in fusion remat)
    >>> faults.disarm()
"""

from __future__ import annotations

import sys
import traceback
from types import FrameType
from typing import Any, Final

from safe_tracectx._support import events

__all__ = ["POINT_KINDS", "InjectedFault", "Injector", "arm", "disarm", "point", "point_name"]

#: The kinds of injection point, and how reports call them.
POINT_KINDS: Final = {"set": "set_tracectx", "proxy": "proxy creation", "pass": "pass entry"}


def point_name(kind: str, pass_label: str | None) -> str:
    """How reports name a point: ``proxy creation in fusion remat``."""
    return POINT_KINDS.get(kind, kind) + (f" in {pass_label}" if pass_label else "")


def _stack_inside(outermost: FrameType | None) -> list[traceback.FrameSummary]:
    """The caller's stack, innermost last, from just inside ``outermost`` (the whole stack if it is not on it)."""
    frames: list[tuple[FrameType, int]] = []
    frame: FrameType | None = sys._getframe(2)  # the caller of InjectedFault()
    while frame is not None and frame is not outermost:
        frames.append((frame, frame.f_lineno))
        frame = frame.f_back
    return list(traceback.StackSummary.extract(reversed(frames), lookup_lines=False))


class InjectedFault(Exception):
    """The exception a sweep raises at one injection point (a plain ``Exception``, as real failures are)."""

    def __init__(self, index: int, kind: str, pass_label: str | None, outermost: FrameType | None = None) -> None:
        super().__init__(f"injected fault at point {index} ({point_name(kind, pass_label)})")
        self.index = index
        self.kind = kind
        self.pass_label = pass_label
        #: Where it was raised, innermost last: the frames inside ``outermost`` (the frame that armed the
        #: injector: the run's own frames, not the sweep's), this package's among them.
        self.stack = _stack_inside(outermost)


class Injector:
    """Counts injection points; with a ``target``, raises at that one (once)."""

    __slots__ = ("target", "index", "points", "fired", "changed_inputs", "armed_in")

    def __init__(self, target: int | None = None) -> None:
        self.target = target
        self.index = 0
        #: (kind, pass label) of each point reached (a sweep checks a faulted run took the counting run's path).
        self.points: list[tuple[str, str | None]] = []
        self.fired: InjectedFault | None = None
        #: Passes left by the fault that had changed one of their input traces: dicts with ``label``, ``trace``.
        self.changed_inputs: list[dict[str, Any]] = []
        #: The frame that armed it: a fault's stack is cut there (``arm`` sets it).
        self.armed_in: FrameType | None = None

    def hit(self, kind: str, pass_label: str | None) -> None:
        index = self.index
        self.index = index + 1
        if self.fired is None:  # after the fault the path is the error path: not comparable, not kept
            self.points.append((kind, pass_label))
        if index == self.target and self.fired is None:
            self.fired = InjectedFault(index, kind, pass_label, self.armed_in)
            raise self.fired


#: The armed injector (None: sweeping is off, and each point costs one global lookup).
injector: Injector | None = None


def arm(new: Injector) -> Injector:
    """Make ``new`` the armed injector; return it. Its faults' stacks start inside the caller's frame."""
    global injector
    new.armed_in = sys._getframe(1)
    injector = new
    return new


def disarm() -> None:
    """No injector: the points cost nothing but a check."""
    global injector
    if injector is not None:
        injector.armed_in = None  # no frame kept alive
    injector = None


def point(kind: str, pass_label: str | None) -> None:
    """One injection point of ``kind`` (``set``, ``proxy``, ``pass``); may raise ``InjectedFault``."""
    if injector is not None and not events.own_work.get():  # this package's own replays are no point of the user's
        injector.hit(kind, pass_label)
