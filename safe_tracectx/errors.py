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

from typing import ClassVar, Final, Literal

from safe_tracectx.callsite import CallSite

__all__ = [
    "BrokenTraceError",
    "CheckName",
    "FIXES",
    "LeakedProxyError",
    "MissingTraceError",
    "NameClashError",
    "ReadOnlyTraceError",
    "TraceContextError",
    "TraceContextWarning",
    "TracelessRecordingError",
    "UnbalancedContextError",
]

#: The policy's checks: each names one field of :class:`safe_tracectx.Policy`.
CheckName = Literal["missing_trace", "unbalanced", "name_clash", "leaked_proxy", "read_only", "broken_trace"]

#: The fix of each kind of misuse, in one place (every message that needs one takes it from here).
FIXES: Final[dict[str, str]] = {
    "missing_trace": (
        "make the owning trace active with `with tracectx(trace):`; to only borrow a namer, "
        "use `with scratch_trace(*traces_to_avoid) as scratch:`; for a proxy owned by no trace, "
        "opt in with `with traceless():` or traceless_tensorproxy(...)"
    ),
    "unbalanced": (
        "enter and exit trace contexts in nested order in one thread/task: use `with tracectx(...)` "
        "(or try/finally around set_tracectx/reset_tracectx), and exit each block exactly once"
    ),
    "raw_set": (
        "reset every set_tracectx() in a `finally` (or use `with tracectx(trace):`); "
        "`safe-tracectx lint` finds the unguarded sets"
    ),
    "read_only": (
        "do not make a trace active just to borrow its namer: name new proxies in "
        "`with scratch_trace(trace) as scratch:` and commit them with scratch.commit_names(into=...) "
        "(thunder.core.trace.from_trace shares the `names` set, so it modifies the original too)"
    ),
    "traceless_recording": (
        "use `with scratch_trace() as trace:` to record operations in a throwaway trace, "
        "or call the meta function directly (for example prims.add.meta(a, b))"
    ),
    "install": (
        "pair every install() with one uninstall() (or use `with installed(...):`); "
        "an installation made by installed(), audit(), `safe-tracectx run` or the pytest plugin is ended by its owner"
    ),
}


class TraceContextError(RuntimeError):
    """Base class: a misuse of Thunder's trace context.

    ``message`` says what happened, ``site`` where, ``fix`` what to do about it.
    """

    #: The policy check (a field of Policy) that decides what happens to this error (None: always raised).
    check: ClassVar[CheckName | None] = None

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

    check = "missing_trace"


class UnbalancedContextError(TraceContextError):
    """A trace context was exited out of order, twice, elsewhere, or over a leaked set."""

    check = "unbalanced"


class NameClashError(TraceContextError):
    """One name stands for two different things (two proxies, or a taken name)."""

    check = "name_clash"


class LeakedProxyError(TraceContextError):
    """A traceless proxy appeared inside a real trace."""

    check = "leaked_proxy"


class ReadOnlyTraceError(TraceContextError):
    """Names or bound symbols were added to a trace entered with ``read_only=True``."""

    check = "read_only"


class BrokenTraceError(TraceContextError):
    """A pass produced a trace that is broken but not by its trace context (a proxy used before it is defined).

    Thunder's own ``DebugOptions(check_traces=True)`` is the tool for these; the
    pass audit only reports them, naming the pass (``Policy.broken_trace``).
    """

    check = "broken_trace"


class TracelessRecordingError(TraceContextError):
    """A Thunder operation tried to record a bound symbol inside ``traceless()``."""


class TraceContextWarning(UserWarning):
    """Issued instead of raising when the policy's action for an event is ``"warn"``."""
