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
    >>> get_policy().broken_trace  # a trace whose program would fail: raised at the pass that made it
    'raise'

:func:`safe_tracectx.policy.actions.act` carries an action out; ``use_policy`` is a
block like ``tracectx`` (``safe_tracectx.context.policy_block``).
"""

from __future__ import annotations

import dataclasses
import os
from contextvars import ContextVar
from collections.abc import Iterable, Mapping
from typing import Any, Final, Literal, get_args

from safe_tracectx.errors import TRACE_CHECKS

__all__ = [
    "AUDIT",
    "ENV_VAR",
    "LENIENT",
    "PRESETS",
    "STRICT",
    "Action",
    "CheckAction",
    "MissingTraceAction",
    "OverrideAction",
    "Policy",
    "PresetName",
    "as_policy",
    "check_overrides",
    "default_policy",
    "or_default",
    "get_policy",
    "set_default_policy",
    "swap_default_policy",
]

Action = Literal["raise", "warn", "log", "ignore"]
MissingTraceAction = Literal["raise", "warn", "log", "ignore", "traceless"]
#: What a single trace check may be given: an action, or ``off`` (not reported at all, not even to the audit).
CheckAction = Literal["raise", "warn", "log", "ignore", "off"]
#: What ``Policy.replace(**overrides)`` and ``use_policy(..., **overrides)`` take as a value (an event's field or a
#: single trace check: the keyword names are checked at run time, so mypy sees only that the value is an action).
OverrideAction = Literal["raise", "warn", "log", "ignore", "traceless", "off"]
#: The names of the presets (``use_policy("lenient")``, ``install("strict")``); the run-time check also takes them in
#: any case and with spaces around (an environment variable, a command line), mypy only these.
PresetName = Literal["strict", "lenient", "audit"]

ENV_VAR: Final = "SAFE_TRACECTX_POLICY"

_ACTIONS: Final = get_args(Action)
_MISSING_TRACE_ACTIONS: Final = get_args(MissingTraceAction)
_CHECK_ACTIONS: Final = get_args(CheckAction)


@dataclasses.dataclass(frozen=True, slots=True)
class Policy:
    """One action per check: ``"raise"``, ``"warn"``, ``"log"`` or ``"ignore"``.

    ``missing_trace`` also takes ``"traceless"``: a proxy made with no active
    trace is then made as if inside :func:`safe_tracectx.traceless`.
    ``broken_trace`` (a pass made a trace whose program will fail: a use
    before definition, a callee it cannot name, a hand-over that does not
    match) raises under STRICT. ``checks`` gives single trace checks an action
    of their own (``Policy().replace(defined_twice="warn")``).
    """

    missing_trace: MissingTraceAction = "raise"
    unbalanced: Action = "raise"
    name_clash: Action = "raise"
    leaked_proxy: Action = "raise"
    read_only: Action = "raise"
    broken_trace: Action = "raise"
    #: Actions of single trace checks (``("defined-twice", "warn")``, ...), over their category's. Two are off
    #: unless asked for: they foresee a clash rather than see one (a name its trace's namer can still hand out; a
    #: namer borrowed from another trace); when the clash happens, ``defined-twice`` reports it.
    checks: tuple[tuple[str, CheckAction], ...] = (("unregistered-name", "off"), ("borrowed-namer", "off"))

    def __post_init__(self) -> None:
        for field in dataclasses.fields(self):
            if field.name == "checks":
                continue
            value = getattr(self, field.name)
            valid = _MISSING_TRACE_ACTIONS if field.name == "missing_trace" else _ACTIONS
            if value not in valid:
                raise ValueError(
                    f"Policy.{field.name}={value!r} is not a valid action; use one of: {', '.join(valid)}"
                )
        if not isinstance(self.checks, tuple):
            raise TypeError(f"Policy.checks takes a tuple of (check, action) pairs, got {type(self.checks).__name__}")
        for item in self.checks:
            if not (isinstance(item, tuple) and len(item) == 2):
                raise TypeError(f"Policy.checks takes (check, action) pairs, got {item!r}")
            check, action = item
            if check not in TRACE_CHECKS:
                raise ValueError(f"Policy.checks: {check!r} is not a trace check; use one of: {', '.join(TRACE_CHECKS)}")
            if action not in _CHECK_ACTIONS:
                raise ValueError(
                    f"Policy.checks: {check}={action!r} is not a valid action; use one of: {', '.join(_CHECK_ACTIONS)}"
                )

    def action_of_check(self, kind: str) -> CheckAction | None:
        """The action this policy gives one trace check of its own (None: its category's field decides)."""
        for check, action in self.checks:
            if check == kind:
                return action
        return None

    def replace(self, **overrides: OverrideAction) -> Policy:
        """A copy with some actions changed: policy fields (``name_clash="warn"``) or single trace checks
        (``defined_twice="warn"``, underscores for hyphens); unknown names raise ``ValueError``."""
        known = {field.name for field in dataclasses.fields(self)} - {"checks"}
        fields: dict[str, str] = {}
        checks = dict(self.checks)
        unknown = []
        for name, action in overrides.items():
            if name in known:
                fields[name] = action
            elif (check := name.replace("_", "-")) in TRACE_CHECKS:
                checks[check] = action  # type: ignore[assignment]
            else:
                unknown.append(name)
        if unknown:
            raise ValueError(
                f"unknown policy check(s) {', '.join(sorted(unknown))}; the checks are: {', '.join(sorted(known))}, "
                f"and the trace checks: {', '.join(c.replace('-', '_') for c in TRACE_CHECKS)}"
            )
        return dataclasses.replace(self, **fields, checks=tuple(checks.items()))  # type: ignore[arg-type]


STRICT: Final = Policy()
LENIENT: Final = Policy(
    missing_trace="traceless", unbalanced="warn", name_clash="warn", leaked_proxy="warn", read_only="warn",
    broken_trace="warn",
)
#: The non-raising mode of ``safe-tracectx run --policy audit`` and ``pytest --safe-tracectx=audit``: every
#: violation is recorded by the audit (``act`` records before acting), nothing raises, warns or changes what
#: Thunder does (a proxy made with no trace fails as it would without the hooks).
AUDIT: Final = Policy(
    missing_trace="ignore", unbalanced="ignore", name_clash="ignore", leaked_proxy="ignore", read_only="ignore",
    broken_trace="ignore",
)
PRESETS: Final[dict[str, Policy]] = {"strict": STRICT, "lenient": LENIENT, "audit": AUDIT}

#: The policy of the innermost ``use_policy`` block (per thread and asyncio task).
POLICY_VAR: Final[ContextVar[Policy | None]] = ContextVar("safe_tracectx.policy", default=None)
_default_policy: Policy | None = None


def _preset(name: str, *, source: str) -> Policy:
    try:
        return PRESETS[name.strip().lower()]
    except KeyError:
        raise ValueError(f"{source}={name!r} is not a policy preset; use one of: {', '.join(PRESETS)}") from None


def as_policy(policy: object, *, source: str, overrides: Mapping[str, OverrideAction] | None = None) -> Policy:
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


def check_overrides(items: Iterable[str], *, option: str) -> dict[str, OverrideAction]:
    """``["defined-twice=warn", ...]`` (``--check``, ``--safe-tracectx-check``) as ``Policy.replace`` overrides;
    a ValueError naming ``option`` and the form for a malformed item.

        >>> check_overrides(["use-before-definition=warn"], option="--check")
        {'use_before_definition': 'warn'}
    """
    overrides: dict[str, Any] = {}  # the actions are checked by Policy.replace
    for item in items:
        check, equals, action = item.partition("=")
        if not equals or not check.strip() or not action.strip():
            raise ValueError(f"{option} {item}: give CHECK=ACTION, e.g. {option} use-before-definition=warn")
        name = check.strip().replace("_", "-")
        if name not in TRACE_CHECKS:
            raise ValueError(f"{option} {item}: {check.strip()!r} is not a trace check; use one of: "
                             f"{', '.join(TRACE_CHECKS)} (a whole event: --policy, or use_policy(...))")
        overrides[name.replace("-", "_")] = action.strip()
    return overrides


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


def set_default_policy(policy: Policy | PresetName | None, **overrides: OverrideAction) -> Policy:
    """Set the process-wide default (``None``: back to ``SAFE_TRACECTX_POLICY`` or STRICT); return it."""
    if policy is None and not overrides:
        swap_default_policy(None)
        return get_policy()
    base = _env_default() if policy is None else as_policy(policy, source="set_default_policy()")
    chosen = base.replace(**overrides) if overrides else base
    swap_default_policy(chosen)
    return chosen
