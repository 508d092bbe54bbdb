"""The block mechanism under every manager: a stack of activations of one ContextVar.

Each block remembers the value it displaced (its token) and the block that
owned that value (an owner ContextVar beside the value's). The rules, the same
for ``tracectx``, ``use_policy`` and a guarded ``set_tracectx``:

- exiting the block on top restores what was active at its enter;
- exiting a block further down closes it and every block still open above it
  (reported; their own later exit is silent and changes nothing);
- exiting a block in another thread or Context than the one that entered it
  is reported and changes nothing (its owner can still exit it);
- exiting twice, or before entering, is reported and changes nothing.

    >>> from contextvars import ContextVar
    >>> from safe_tracectx.context.blocks import Block
    >>> class Flag(Block):
    ...     value_var = ContextVar("flag", default=None)
    ...     owner_var = ContextVar("flag.owner", default=None)
    >>> block = Flag("on")
    >>> block._activate()
    >>> Flag.value_var.get(), block._close(), Flag.value_var.get()
    ('on', [], None)
"""

from __future__ import annotations

from contextvars import ContextVar, Token
from typing import Any, ClassVar, Final

import thunder.core.trace as _thunder_trace

from safe_tracectx._support.callsite import find_call_site
from safe_tracectx._support.labels import describe_trace
from safe_tracectx.errors import FIXES, TraceContextError, UnbalancedContextError

__all__ = ["ENDED", "NEW", "OPEN", "ORPHANED", "OWNER_VAR", "RELEASED", "TRACE_VAR", "Block", "not_initialised", "open_blocks", "require_initialised"]

#: Thunder's trace ContextVar (never replaced: ``install()`` hooks set/reset, not the variable).
TRACE_VAR: Final[ContextVar[Any]] = _thunder_trace._tracectx
#: The block that set the value now in TRACE_VAR (None: no block of ours).
OWNER_VAR: Final[ContextVar[Block | None]] = ContextVar("safe_tracectx.owner", default=None)

# Block states.
NEW: Final = 0
OPEN: Final = 1
ENDED: Final = 2
ORPHANED: Final = 3  # closed by an enclosing block's exit; its own exit is then silent
RELEASED: Final = 4  # a guarded set still open when the hooks were removed: no longer tracked

_WRONG_CONTEXT: Final = (
    "was exited in another thread or Context (a different Context than the one that entered it: "
    "an asyncio task, copy_context().run, a generator resumed elsewhere); nothing was changed, "
    "and it stays active where it was entered until it is exited there"
)


def not_initialised(block: object) -> TypeError:
    """The error for a block whose subclass's ``__init__`` did not call its base's (it has no state to enter)."""
    base = next((c for c in type(block).__mro__ if c.__module__.startswith("safe_tracectx.")), Block)
    return TypeError(
        f"{type(block).__qualname__} was never initialised: its __init__ must call "
        f"super().__init__(...) ({base.__name__}.__init__ sets up the block before it can be entered)"
    )


def require_initialised(block: object, *fields: str) -> None:
    """Raise :func:`not_initialised` unless ``block`` has its state and ``fields`` (a decorator's check, once)."""
    if not all(hasattr(block, name) for name in ("_state", *fields)):
        raise not_initialised(block)


class Block:
    """One activation of a value: made by a manager's enter or by a guarded ``set_tracectx``."""

    __slots__ = ("_value", "_state", "_value_token", "_owner_token")

    #: The variable the block sets, and the one that records which block set it.
    value_var: ClassVar[ContextVar[Any]] = TRACE_VAR
    owner_var: ClassVar[ContextVar[Any]] = OWNER_VAR
    #: The fix an unbalanced exit of this kind of block suggests.
    unbalanced_fix: ClassVar[str] = FIXES["unbalanced"]

    _value: Any
    _state: int
    _value_token: Token[Any]
    _owner_token: Token[Any]

    def __init__(self, value: Any) -> None:
        self._value = value
        self._state = NEW

    def label(self) -> str:
        """How a report names this block, e.g. ``tracectx(trace of f @0x...)``."""
        return f"{type(self).__name__}({describe_trace(self._value)})"

    @property
    def is_open(self) -> bool:
        """True between its enter and the exit that closes it."""
        return self._state is OPEN

    def release(self) -> None:
        """Stop tracking a block that is open or was closed by another exit (its hooks are gone)."""
        if self._state is OPEN or self._state is ORPHANED:
            self._state = RELEASED

    def close_as_cleanup(self) -> list[TraceContextError]:
        """Close an open block for its owner (a leak's clean-up); the owner's own later exit is then silent."""
        return self._close(orphan=True)

    def _below(self) -> Block | None:
        """The block that owned the value this one displaced (read from the owner token: no extra get at enter)."""
        previous = self._owner_token.old_value
        return None if previous is Token.MISSING else previous

    def _activate(self) -> None:
        self._value_token = self.value_var.set(self._value)
        self._owner_token = self.owner_var.set(self)
        self._state = OPEN

    def _deactivate_fast(self) -> bool:
        """Close the block if it is on top in its own Context; False means: take :meth:`_close`."""
        if self._state is OPEN and self.owner_var.get() is self and self.value_var.get(None) is self._value:
            try:
                self.value_var.reset(self._value_token)
            except ValueError:  # a Context copied from the one that entered it
                return False
            self.owner_var.reset(self._owner_token)
            self._state = ENDED
            return True
        return False

    def _on_closed(self) -> list[TraceContextError]:
        """What closing this block found wrong besides its balance (a read-only block's additions)."""
        return []

    def _close(self, *, orphan: bool = False) -> list[TraceContextError]:
        """Close the block whatever the state; return what was wrong. ``orphan``: a clean-up's close."""
        state = self._state
        if state is NEW:
            return [self._unbalanced("was exited without being entered")]
        if state is ORPHANED or state is RELEASED:
            self._state = ENDED
            return []
        if state is ENDED:
            return [self._unbalanced("was exited a second time")]

        value_var, owner_var = self.value_var, self.owner_var
        above: list[Block] = []
        block = owner_var.get()
        while block is not None and block is not self:
            above.append(block)
            block = block._below()
        if block is None:
            return [self._unbalanced(_WRONG_CONTEXT)]
        value_before = value_var.get(None)
        try:
            owner_var.reset(self._owner_token)  # also tells whether this is the entering Context
        except ValueError:
            return [self._unbalanced(_WRONG_CONTEXT)]
        errors: list[TraceContextError] = []
        still_open = [b for b in above if b._state is OPEN]
        for inner in above:  # innermost first; spend their tokens so no late reset re-activates ours
            if inner._state is OPEN:
                inner._state = ORPHANED
                errors.extend(inner._on_closed())
            try:
                value_var.reset(inner._value_token)
            except (ValueError, RuntimeError):
                pass
        # Spent even when closed as a clean-up: a late reset of this token (after uninstall(), through
        # Thunder's own reset_tracectx) then raises Python's RuntimeError instead of re-activating a stale trace.
        value_var.reset(self._value_token)
        self._state = ORPHANED if orphan else ENDED
        errors.extend(self._on_closed())
        if still_open:
            inner_labels = "; ".join(b.label() for b in reversed(still_open))
            problem = f"was exited while blocks entered inside it were still open: {inner_labels}. They were closed with it"
            errors.insert(0, self._unbalanced(problem))
        elif value_before is not self._value:
            problem = (
                f"was exited while an inner set_tracectx() was never reset (it left "
                f"{describe_trace(value_before)} active); that trace was deactivated"
            )
            errors.insert(0, self._unbalanced(problem))
        return errors

    def _unbalanced(self, problem: str) -> UnbalancedContextError:
        return UnbalancedContextError(f"{self.label()} {problem}", fix=self.unbalanced_fix, site=find_call_site())


def open_blocks(owner_var: ContextVar[Any] = OWNER_VAR) -> list[Block]:
    """The blocks open in this context, innermost first."""
    blocks: list[Block] = []
    block = owner_var.get()
    while block is not None:
        if block._state is OPEN:
            blocks.append(block)
        block = block._below()
    return blocks
