"""The strict/lenient switch: what to do with each kind of misuse.

A :class:`Policy` holds one action per event. :func:`act` is the one place
that carries an action out::

    >>> from safe_tracectx import LENIENT, get_policy, use_policy
    >>> with use_policy("lenient", unbalanced="raise") as policy:
    ...     (policy.missing_trace, policy.unbalanced)
    ('traceless', 'raise')
    >>> get_policy().missing_trace
    'raise'
"""

from __future__ import annotations

import dataclasses
import functools
import logging
import os
import warnings
from collections.abc import Callable
from contextvars import ContextVar, Token
from typing import Any, Final, Literal, TypeVar, get_args

from safe_tracectx import events
from safe_tracectx.errors import EventName, TraceContextError, TraceContextWarning

__all__ = [
    "ENV_VAR",
    "LENIENT",
    "PRESETS",
    "STRICT",
    "Action",
    "MissingTraceAction",
    "Policy",
    "act",
    "get_policy",
    "set_default_policy",
    "use_policy",
]

Action = Literal["raise", "warn", "log", "ignore"]
MissingTraceAction = Literal["raise", "warn", "log", "ignore", "traceless"]

ENV_VAR: Final = "SAFE_TRACECTX_POLICY"
logger = logging.getLogger("safe_tracectx")

_ACTIONS: Final = get_args(Action)
_MISSING_TRACE_ACTIONS: Final = get_args(MissingTraceAction)
_F = TypeVar("_F", bound=Callable[..., Any])


@dataclasses.dataclass(frozen=True, slots=True)
class Policy:
    """One action per event: ``"raise"``, ``"warn"``, ``"log"`` or ``"ignore"``.

    ``missing_trace`` also takes ``"traceless"``: a proxy made with no active
    trace is then made as if inside :func:`safe_tracectx.traceless`.
    """

    missing_trace: MissingTraceAction = "raise"
    unbalanced: Action = "raise"
    name_clash: Action = "raise"
    leaked_proxy: Action = "raise"
    read_only: Action = "raise"

    def __post_init__(self) -> None:
        for field in dataclasses.fields(self):
            value = getattr(self, field.name)
            valid = _MISSING_TRACE_ACTIONS if field.name == "missing_trace" else _ACTIONS
            if value not in valid:
                raise ValueError(
                    f"Policy.{field.name}={value!r} is not a valid action; "
                    f"use one of: {', '.join(valid)}"
                )

    def replace(self, **overrides: str) -> Policy:
        """A copy with some actions changed; unknown event names raise ``ValueError``."""
        known = {field.name for field in dataclasses.fields(self)}
        unknown = sorted(set(overrides) - known)
        if unknown:
            raise ValueError(
                f"unknown policy event(s) {', '.join(unknown)}; the events are: {', '.join(sorted(known))}"
            )
        return dataclasses.replace(self, **overrides)  # type: ignore[arg-type]


STRICT: Final = Policy()
LENIENT: Final = Policy(
    missing_trace="traceless", unbalanced="warn", name_clash="warn", leaked_proxy="warn", read_only="warn"
)
PRESETS: Final[dict[str, Policy]] = {"strict": STRICT, "lenient": LENIENT}

_policy_var: ContextVar[Policy] = ContextVar("safe_tracectx.policy")
_default_policy: Policy | None = None


def _preset(name: str, *, source: str) -> Policy:
    try:
        return PRESETS[name.strip().lower()]
    except KeyError:
        raise ValueError(
            f"{source}={name!r} is not a policy preset; use one of: {', '.join(PRESETS)}"
        ) from None


def _coerce(policy: Policy | str, *, source: str) -> Policy:
    if isinstance(policy, Policy):
        return policy
    if isinstance(policy, str):
        return _preset(policy, source=source)
    raise TypeError(
        f"{source} takes a Policy or a preset name ({', '.join(PRESETS)}), got {type(policy).__name__}"
    )


def _env_default() -> Policy:
    value = os.environ.get(ENV_VAR)
    if value is None or value == "":
        return STRICT
    return _preset(value, source=f"the environment variable {ENV_VAR}")


def get_policy() -> Policy:
    """The policy in force: the innermost :func:`use_policy`, else the default."""
    policy = _policy_var.get(None)
    if policy is not None:
        return policy
    if _default_policy is not None:
        return _default_policy
    return _env_default()


def set_default_policy(policy: Policy | str | None, **overrides: str) -> Policy:
    """Set the process-wide default (``None``: back to ``SAFE_TRACECTX_POLICY`` or STRICT)."""
    global _default_policy
    if policy is None and not overrides:
        _default_policy = None
        return get_policy()
    base = _env_default() if policy is None else _coerce(policy, source="set_default_policy()")
    _default_policy = base.replace(**overrides) if overrides else base
    return _default_policy


class use_policy:
    """Use a policy for a block (contextvars: per thread and per asyncio task).

    Also a decorator; each call then gets its own token::

        @use_policy("lenient")
        def explore(): ...
    """

    __slots__ = ("_policy", "_token")

    def __init__(self, policy: Policy | str, /, **overrides: str) -> None:
        base = _coerce(policy, source="use_policy()")
        self._policy = base.replace(**overrides) if overrides else base
        self._token: Token[Policy] | None = None

    def __enter__(self) -> Policy:
        if self._token is not None:
            raise TypeError("this use_policy() is already entered; create a new one for each with-block")
        self._token = _policy_var.set(self._policy)
        return self._policy

    def __exit__(self, *exc_info: object) -> None:
        token, self._token = self._token, None
        if token is not None:
            _policy_var.reset(token)

    def __call__(self, func: _F) -> _F:
        policy = self._policy

        @functools.wraps(func)
        def with_policy(*args: Any, **kwargs: Any) -> Any:
            token = _policy_var.set(policy)
            try:
                return func(*args, **kwargs)
            finally:
                _policy_var.reset(token)

        return with_policy  # type: ignore[return-value]


def act(error: TraceContextError, *, policy: Policy | None = None) -> None:
    """Carry out the policy's action for ``error``: raise, warn, log or ignore it.

    Errors without an event (``TracelessRecordingError``) are always raised.
    """
    event: EventName | None = error.event
    action = "raise" if event is None else getattr(policy or get_policy(), event)
    if events.sinks:
        events.emit(
            "violation",
            trace=None,
            site=error.site,
            code=type(error).__name__,
            event=event,
            action=action,
            message=error.message,
            fix=error.fix,
        )
    if action == "raise":
        raise error
    if action == "warn":
        site = error.site
        if site is None:
            warnings.warn(str(error), TraceContextWarning, stacklevel=3)
        else:
            warnings.warn_explicit(str(error), TraceContextWarning, site.filename, site.lineno)
    elif action == "log":
        logger.warning("%s", error)
