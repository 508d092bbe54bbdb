"""Carry out the policy's action for one misuse: raise, warn, log or ignore it.

    >>> from safe_tracectx.policy.actions import act
    >>> from safe_tracectx.errors import UnbalancedContextError
    >>> from safe_tracectx.policy import Policy
    >>> act(UnbalancedContextError("exited twice", fix="exit once"), policy=Policy(unbalanced="ignore"))

A ``KeyboardInterrupt``, ``SystemExit`` or ``GeneratorExit`` on its way out is
never replaced: the violation becomes a note on it (and a log record) instead.
"""

from __future__ import annotations

import logging
import warnings

from safe_tracectx._support import events
from safe_tracectx.errors import TraceContextError, TraceContextWarning
from safe_tracectx.policy import Policy, get_policy

__all__ = ["act", "action_for", "carry_out", "logger", "outcome", "record"]

logger = logging.getLogger("safe_tracectx")


def action_for(error: TraceContextError, policy: Policy | None = None) -> str:
    """The action the policy (default: the one in force) takes for ``error``."""
    check = error.check
    if check is None:
        return "raise"
    chosen = policy or get_policy()
    if error.kind is not None and (own := chosen.action_of_check(error.kind)) is not None:
        return own
    action = str(getattr(chosen, check))
    # "traceless" names a proxy in a traceless context; what cannot be done there (a symbol called with no trace,
    # which Thunder refuses next) is warned about
    return "warn" if action == "traceless" else action


def outcome(action: str, in_flight: BaseException | None) -> str:
    """What carrying out ``action`` will do, as the audit records it: under a propagating KeyboardInterrupt (any
    BaseException that is not an Exception) a raise, warning or log is ``a note on the KeyboardInterrupt``."""
    if action not in ("ignore", "off") and in_flight is not None and not isinstance(in_flight, Exception):
        return f"a note on the {type(in_flight).__name__}"
    return action


def record(error: TraceContextError, action: str) -> None:
    """Send ``error`` to the running audits as a violation event."""
    if events.sinks:
        events.emit(
            "violation",
            trace=None,
            site=error.site,
            code=type(error).__name__,
            check=error.check,
            action=action,
            message=error.message,
            fix=error.fix,
            kind=error.kind,
            names=list(error.names),
            culprit=None if error.culprit is None else f"{error.culprit[0]} ({error.culprit[1]})",
        )


def carry_out(error: TraceContextError, action: str, *, in_flight: BaseException | None = None) -> None:
    """Raise, warn, log or ignore ``error``; never replace a BaseException that is not an Exception."""
    __tracebackhide__ = True  # pytest shows the user's line, not this one
    if action in ("ignore", "off"):
        return
    if in_flight is not None and not isinstance(in_flight, Exception):
        in_flight.add_note(f"safe-tracectx: {error}")
        logger.warning("%s", error)
        return
    if action == "raise":
        raise error
    if action == "warn":
        site = error.site
        if site is None:
            warnings.warn(str(error), TraceContextWarning, stacklevel=4)
        else:
            warnings.warn_explicit(str(error), TraceContextWarning, site.filename, site.lineno)
    else:
        logger.warning("%s", error)


def act(
    error: TraceContextError, *, policy: Policy | None = None, in_flight: BaseException | None = None
) -> None:
    """Carry out the policy's action for ``error``; errors of no check (TracelessRecordingError) always raise.

    ``in_flight`` is the exception propagating where the error was found (an
    ``__exit__``'s): if it is a BaseException that is not an Exception, it is
    left to propagate unchanged and carries the error as a note.
    """
    __tracebackhide__ = True
    try:
        action = action_for(error, policy)
    except ValueError as bad_policy:  # a typo in SAFE_TRACECTX_POLICY: said, but never over a KeyboardInterrupt
        if in_flight is not None and not isinstance(in_flight, Exception):
            in_flight.add_note(f"safe-tracectx: {bad_policy}; and: {error}")
            logger.warning("%s; and: %s", bad_policy, error)
            return
        raise
    if action == "off":  # a trace check switched off: not a finding at all
        return
    record(error, outcome(action, in_flight))
    carry_out(error, action, in_flight=in_flight)
