"""The strict/lenient switch: what to do with each kind of misuse.

A :class:`Policy` holds one action per check; :func:`get_policy` says which
policy is in force (the innermost ``use_policy`` block, else the process
default, else ``SAFE_TRACECTX_POLICY``, else STRICT)::

    >>> from safe_tracectx import LENIENT, get_policy, use_policy
    >>> with use_policy("lenient", unbalanced="raise") as policy:
    ...     (policy.missing_trace, policy.unbalanced)
    ('traceless', 'raise')
    >>> get_policy().missing_trace
    'raise'
    >>> get_policy().broken_trace  # a broken trace is Thunder's to catch: reported, never raised by default
    'warn'

:func:`safe_tracectx.actions.act` carries an action out; ``use_policy`` is a
block like ``tracectx`` (``safe_tracectx.context.policy_block``).
"""

from __future__ import annotations

import dataclasses
import os
from contextvars import ContextVar
from typing import Final, Literal, get_args

__all__ = [
    "AUDIT",
    "ENV_VAR",
    "LENIENT",
    "PRESETS",
    "STRICT",
    "Action",
    "MissingTraceAction",
    "Policy",
    "as_policy",
    "default_policy",
    "or_default",
    "get_policy",
    "set_default_policy",
    "swap_default_policy",
]

Action = Literal["raise", "warn", "log", "ignore"]
MissingTraceAction = Literal["raise", "warn", "log", "ignore", "traceless"]

ENV_VAR: Final = "SAFE_TRACECTX_POLICY"

_ACTIONS: Final = get_args(Action)
_MISSING_TRACE_ACTIONS: Final = get_args(MissingTraceAction)


@dataclasses.dataclass(frozen=True, slots=True)
class Policy:
    """One action per check: ``"raise"``, ``"warn"``, ``"log"`` or ``"ignore"``.

    ``missing_trace`` also takes ``"traceless"``: a proxy made with no active
    trace is then made as if inside :func:`safe_tracectx.traceless`.
    ``broken_trace`` (a pass's output uses a proxy before defining it: a broken
    trace, not a trace-context bug) warns in both presets, so that Thunder's
    own checks and errors behave as without the hooks.
    """

    missing_trace: MissingTraceAction = "raise"
    unbalanced: Action = "raise"
    name_clash: Action = "raise"
    leaked_proxy: Action = "raise"
    read_only: Action = "raise"
    broken_trace: Action = "warn"

    def __post_init__(self) -> None:
        for field in dataclasses.fields(self):
            value = getattr(self, field.name)
            valid = _MISSING_TRACE_ACTIONS if field.name == "missing_trace" else _ACTIONS
            if value not in valid:
                raise ValueError(
                    f"Policy.{field.name}={value!r} is not a valid action; use one of: {', '.join(valid)}"
                )

    def replace(self, **overrides: str) -> Policy:
        """A copy with some actions changed; unknown check names raise ``ValueError``."""
        known = {field.name for field in dataclasses.fields(self)}
        unknown = sorted(set(overrides) - known)
        if unknown:
            raise ValueError(
                f"unknown policy check(s) {', '.join(unknown)}; the checks are: {', '.join(sorted(known))}"
            )
        return dataclasses.replace(self, **overrides)  # type: ignore[arg-type]


STRICT: Final = Policy()
LENIENT: Final = Policy(
    missing_trace="traceless", unbalanced="warn", name_clash="warn", leaked_proxy="warn", read_only="warn",
    broken_trace="warn",
)
#: The non-raising mode of ``safe-tracectx run --policy audit`` and ``pytest --safe-tracectx=audit``: every
#: violation is recorded by the audit (``act`` records before acting), nothing raises, warns or changes what
#: Thunder does (a proxy made with no trace fails as it would without the hooks).
AUDIT: Final = Policy(**{field.name: "ignore" for field in dataclasses.fields(Policy)})
PRESETS: Final[dict[str, Policy]] = {"strict": STRICT, "lenient": LENIENT, "audit": AUDIT}

#: The policy of the innermost ``use_policy`` block (per thread and asyncio task).
POLICY_VAR: Final[ContextVar[Policy | None]] = ContextVar("safe_tracectx.policy", default=None)
_default_policy: Policy | None = None


def _preset(name: str, *, source: str) -> Policy:
    try:
        return PRESETS[name.strip().lower()]
    except KeyError:
        raise ValueError(f"{source}={name!r} is not a policy preset; use one of: {', '.join(PRESETS)}") from None


def as_policy(policy: object, *, source: str, overrides: dict[str, str] | None = None) -> Policy:
    """``policy`` (a Policy or a preset name) with ``overrides``; a clear error naming ``source`` otherwise."""
    if isinstance(policy, Policy):
        base = policy
    elif isinstance(policy, str):
        base = _preset(policy, source=source)
    else:
        raise TypeError(
            f"{source} takes a Policy or a preset name ({', '.join(PRESETS)}), got {type(policy).__name__}"
        )
    return base.replace(**overrides) if overrides else base


def _env_default() -> Policy:
    value = os.environ.get(ENV_VAR)
    if value is None or value == "":
        return STRICT
    return _preset(value, source=f"the environment variable {ENV_VAR}")


def get_policy() -> Policy:
    """The policy in force: the innermost :func:`use_policy`, else the default."""
    policy = POLICY_VAR.get()
    if policy is not None:
        return policy
    if _default_policy is not None:
        return _default_policy
    return _env_default()


def or_default(policy: Policy | None) -> Policy:
    """``policy``, or the default it stands for when None (``SAFE_TRACECTX_POLICY`` or STRICT)."""
    return policy if policy is not None else _env_default()


def default_policy() -> Policy | None:
    """The process default set by ``set_default_policy``/``install`` (None: ``SAFE_TRACECTX_POLICY`` or STRICT)."""
    return _default_policy


def swap_default_policy(policy: Policy | None) -> Policy | None:
    """Make ``policy`` the process default (None: ``SAFE_TRACECTX_POLICY`` or STRICT); return the one replaced.

    ``install()`` uses it and puts the returned one back; so can a test::

        >>> from safe_tracectx.policy import LENIENT, get_policy, swap_default_policy
        >>> previous = swap_default_policy(LENIENT)
        >>> get_policy() is LENIENT
        True
        >>> swap_default_policy(previous) is LENIENT
        True
    """
    global _default_policy
    if policy is not None and not isinstance(policy, Policy):
        raise TypeError(f"swap_default_policy() takes a Policy or None, got {type(policy).__name__}")
    previous, _default_policy = _default_policy, policy
    return previous


def set_default_policy(policy: Policy | str | None, **overrides: str) -> Policy:
    """Set the process-wide default (``None``: back to ``SAFE_TRACECTX_POLICY`` or STRICT); return it."""
    if policy is None and not overrides:
        swap_default_policy(None)
        return get_policy()
    base = _env_default() if policy is None else as_policy(policy, source="set_default_policy()")
    chosen = base.replace(**overrides) if overrides else base
    swap_default_policy(chosen)
    return chosen
