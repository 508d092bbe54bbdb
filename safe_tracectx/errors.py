"""Error and warning classes.

Every error says what happened, where (the user's ``file:line``), and how to
fix it::

    >>> from safe_tracectx.errors import MissingTraceError
    >>> err = MissingTraceError("no trace is active", fix="wrap it in scratch_trace()")
    >>> print(err)
    no trace is active
      fix: wrap it in scratch_trace()
"""

from __future__ import annotations

from typing import ClassVar, Literal

from safe_tracectx.callsite import CallSite

__all__ = [
    "EventName",
    "LeakedProxyError",
    "MissingTraceError",
    "NameClashError",
    "ReadOnlyTraceError",
    "TraceContextError",
    "TraceContextWarning",
    "TracelessRecordingError",
    "UnbalancedContextError",
]

#: The policy events: each names one field of :class:`safe_tracectx.Policy`.
EventName = Literal["missing_trace", "unbalanced", "name_clash", "leaked_proxy", "read_only"]


class TraceContextError(RuntimeError):
    """Base class: a misuse of Thunder's trace context.

    ``message`` says what happened, ``site`` where, ``fix`` what to do about it.
    """

    #: The policy field that decides what happens to this error (None: always raised).
    event: ClassVar[EventName | None] = None

    def __init__(self, message: str, *, fix: str, site: CallSite | None = None) -> None:
        self.message = message
        self.fix = fix
        self.site = site
        super().__init__(self._render())

    def _render(self) -> str:
        where = f"\n  at {self.site}" if self.site is not None else ""
        return f"{self.message}{where}\n  fix: {self.fix}"


class MissingTraceError(TraceContextError):
    """A proxy or a name was requested while no trace is active."""

    event = "missing_trace"


class UnbalancedContextError(TraceContextError):
    """A trace context was exited out of order, twice, elsewhere, or over a leaked set."""

    event = "unbalanced"


class NameClashError(TraceContextError):
    """One name stands for two different things (two proxies, or a taken name)."""

    event = "name_clash"


class LeakedProxyError(TraceContextError):
    """A traceless proxy appeared inside a real trace."""

    event = "leaked_proxy"


class ReadOnlyTraceError(TraceContextError):
    """Names or bound symbols were added to a trace entered with ``read_only=True``."""

    event = "read_only"


class TracelessRecordingError(TraceContextError):
    """A Thunder operation tried to record a bound symbol inside ``traceless()``."""


class TraceContextWarning(UserWarning):
    """Issued instead of raising when the policy's action for an event is ``"warn"``."""
