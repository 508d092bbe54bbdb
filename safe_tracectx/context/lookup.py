"""The active trace, and the one branch that decides what happens when there is none.

    >>> from safe_tracectx import current_trace, require_trace, use_policy
    >>> current_trace() is None
    True
    >>> with use_policy("lenient"):
    ...     type(require_trace("naming a proxy")).__name__
    'TracelessTrace'
"""

from __future__ import annotations

from thunder.core.trace import TraceCtx

from safe_tracectx._support.callsite import CallSite, find_call_site
from safe_tracectx.context.blocks import TRACE_VAR
from safe_tracectx.context.traceless_proxies import TracelessTrace
from safe_tracectx.errors import FIXES, MissingTraceError
from safe_tracectx.policy import get_policy
from safe_tracectx.policy.actions import act

__all__ = ["current_trace", "missing_trace_error", "on_missing_trace", "require_trace"]

_trace_get = TRACE_VAR.get


def current_trace() -> TraceCtx | None:
    """The active trace, or None."""
    trace: TraceCtx | None = _trace_get(None)
    return trace


def missing_trace_error(what: str, site: CallSite | None = None) -> MissingTraceError:
    """The MissingTraceError for ``what`` (e.g. "creating a TensorProxy"), at the user's line."""
    return MissingTraceError(
        f"{what} needs an active trace, but no trace is active",
        fix=FIXES["missing_trace"],
        site=site if site is not None else find_call_site(skip_thunder=True),
    )


def on_missing_trace(what: str) -> TraceCtx | None:
    """``Policy.missing_trace`` for ``what``: a traceless naming context for "traceless", else act and None."""
    policy = get_policy()
    if policy.missing_trace == "traceless":
        return TracelessTrace()
    act(missing_trace_error(what), policy=policy)
    return None


def require_trace(what: str) -> TraceCtx | None:
    """The active trace; if none, apply ``Policy.missing_trace``.

    ``"raise"`` raises MissingTraceError naming ``what``; ``"traceless"`` returns
    a traceless naming context; ``"warn"``/``"log"``/``"ignore"`` report and return None.
    """
    trace: TraceCtx | None = _trace_get(None)
    return trace if trace is not None else on_missing_trace(what)
