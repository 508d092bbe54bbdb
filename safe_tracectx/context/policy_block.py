"""``use_policy``: a policy for a block, with the same block rules as ``tracectx``.

Per thread and asyncio task (contextvars); also a decorator, with a fresh block
per call (per resumption for generators and coroutines)::

    >>> from safe_tracectx import get_policy, use_policy
    >>> @use_policy("lenient")
    ... def explore():
    ...     return get_policy().missing_trace
    >>> explore(), get_policy().missing_trace
    ('traceless', 'raise')
"""

from __future__ import annotations

from collections.abc import Callable
from contextvars import ContextVar
from typing import Any, ClassVar, Final, TypeVar

from safe_tracectx.context.blocks import Block, require_initialised
from safe_tracectx.context.decorate import decorate
from safe_tracectx.policy import POLICY_VAR, OverrideAction, Policy, PresetName, as_policy

__all__ = ["use_policy"]

_F = TypeVar("_F", bound=Callable[..., Any])
_POLICY_OWNER: Final[ContextVar[Block[Any] | None]] = ContextVar("safe_tracectx.policy_owner", default=None)


class use_policy(Block[Policy]):
    """Use ``policy`` (a Policy or "strict"/"lenient"/"audit", with per-check overrides) for a block."""

    __slots__ = ()

    value_var: ClassVar[ContextVar[Any]] = POLICY_VAR
    owner_var: ClassVar[ContextVar[Any]] = _POLICY_OWNER
    unbalanced_fix: ClassVar[str] = (
        "enter and exit use_policy() blocks in nested order in one thread/task, each exactly once "
        "(use `with use_policy(...):` or the decorator)"
    )

    def __init__(self, policy: Policy | PresetName, /, **overrides: OverrideAction) -> None:
        Block.__init__(self, as_policy(policy, source="use_policy()", overrides=overrides))

    def label(self) -> str:
        return f"use_policy({self._value!r})"

    def _clone(self) -> use_policy:
        return use_policy(self._value)

    def __call__(self, func: _F) -> _F:
        require_initialised(self, "_value")  # at decoration, not at the first call
        return decorate(func, self._clone, what="use_policy(...)")
