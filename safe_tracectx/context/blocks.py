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

Every block's ``__enter__`` and ``__exit__`` come from :func:`fast_path`, made
once per pair of ContextVars: a subclass that names its own pair gets its own::

    >>> from contextvars import ContextVar
    >>> from safe_tracectx.context.blocks import Block
    >>> class Flag(Block[str]):
    ...     value_var = ContextVar("flag", default=None)
    ...     owner_var = ContextVar("flag.owner", default=None)
    >>> with Flag("on"):
    ...     Flag.value_var.get()
    'on'
    >>> Flag.value_var.get() is None
    True
"""

from __future__ import annotations

from collections.abc import Callable
from contextvars import ContextVar, Token
from types import TracebackType
from typing import TYPE_CHECKING, Any, ClassVar, Final, Generic, TypeVar

import thunder.core.trace as _thunder_trace

from safe_tracectx._support.callsite import find_call_site
from safe_tracectx._support.labels import describe_trace
from safe_tracectx.errors import FIXES, TraceContextError, UnbalancedContextError
from safe_tracectx.policy.actions import act

__all__ = [
    "ENDED",
    "NEW",
    "OPEN",
    "ORPHANED",
    "OWNER_VAR",
    "RELEASED",
    "TRACE_VAR",
    "Block",
    "fast_path",
    "not_initialised",
    "open_blocks",
    "require_initialised",
]

_V = TypeVar("_V")

#: Thunder's trace ContextVar (never replaced: ``install()`` hooks set/reset, not the variable).
TRACE_VAR: Final[ContextVar[Any]] = _thunder_trace._tracectx
#: The block that set the value now in TRACE_VAR (None: no block of ours).
OWNER_VAR: Final[ContextVar[Block[Any] | None]] = ContextVar("safe_tracectx.owner", default=None)

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


def fast_path(value_var: ContextVar[Any], owner_var: ContextVar[Any]) -> dict[str, Callable[..., Any]]:
    """The ``__enter__`` and ``__exit__`` of the blocks on ``value_var``: the one definition of the fast path.

    Made per pair of ContextVars so that their bound methods are looked up once, here: this runs
    on every enter and exit. The exit resets both variables when the block is on top in its own
    Context, and leaves every other case to :meth:`Block._close`.
    """
    value_get, value_set, value_reset = value_var.get, value_var.set, value_var.reset
    owner_get, owner_set, owner_reset = owner_var.get, owner_var.set, owner_var.reset

    def __enter__(self: Block[_V]) -> _V:
        try:
            state, value, snapshots = self._state, self._value, self._snapshots
        except AttributeError:  # a subclass whose __init__ skipped ours (or set only some of its fields)
            raise not_initialised(self) from None
        if state is not NEW:
            raise TypeError(
                f"this {type(self).__name__}() was already entered; create a new one for each "
                "with-block (or use it as a decorator, which makes one per call)"
            )
        if snapshots:  # before activating: if it raises, nothing changed
            self._take_snapshot()
        self._value_token = value_set(value)
        self._owner_token = owner_set(self)
        self._state = OPEN
        return value

    def __exit__(
        self: Block[Any], exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        try:
            state = self._state
        except AttributeError:  # never initialised (an ExitStack.push, a hand-called __exit__)
            raise not_initialised(self) from None
        if state is OPEN and owner_get() is self and value_get(None) is self._value:
            try:
                value_reset(self._value_token)
            except ValueError:  # a Context copied from the one that entered it: _close tells
                pass
            else:
                owner_reset(self._owner_token)
                self._state = ENDED
                if self._snapshots:
                    for error in self._on_closed():
                        act(error, in_flight=exc)
                return
        for error in self._close():
            act(error, in_flight=exc)

    return {"__enter__": __enter__, "__exit__": __exit__}


def _give_fast_path(cls: type[Block[Any]]) -> None:
    """Give ``cls`` the fast path of its ContextVar pair (an ``__enter__`` or ``__exit__`` it defines is kept)."""
    for name, method in fast_path(cls.value_var, cls.owner_var).items():
        if name not in cls.__dict__:
            setattr(cls, name, method)


class Block(Generic[_V]):
    """One activation of a value: made by a manager's enter or by a guarded ``set_tracectx``.

    A subclass's ``__init__`` sets every slot but those in ``set_at_enter`` (a test checks it).
    """

    __slots__ = ("_value", "_state", "_snapshots", "_value_token", "_owner_token")

    #: The variable the block sets, and the one that records which block set it.
    value_var: ClassVar[ContextVar[Any]] = TRACE_VAR
    owner_var: ClassVar[ContextVar[Any]] = OWNER_VAR
    #: The fix an unbalanced exit of this kind of block suggests.
    unbalanced_fix: ClassVar[str] = FIXES["unbalanced"]
    #: The slots set at enter, not by ``__init__``.
    set_at_enter: ClassVar[frozenset[str]] = frozenset({"_value_token", "_owner_token"})

    _value: _V
    _state: int
    _snapshots: bool  # True: _take_snapshot runs at enter (before the value is set), _on_closed at a clean exit
    _value_token: Token[Any]
    _owner_token: Token[Any]

    def __init__(self, value: _V, *, snapshots: bool = False) -> None:
        self._value = value
        self._state = NEW
        self._snapshots = snapshots

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        named = [name for name in ("value_var", "owner_var") if name in cls.__dict__]
        if len(named) == 1:  # half a pair: its blocks and its base's would be taken for one stack, and close each other
            other = "owner_var" if named == ["value_var"] else "value_var"
            raise TypeError(
                f"{cls.__qualname__} names its own {named[0]} but inherits {other}: a block's value and owner "
                f"ContextVars are a pair; name both (value_var, owner_var = ContextVar(...), ContextVar(...)) or neither"
            )
        if named:  # its own pair: its own fast path
            _give_fast_path(cls)

    if TYPE_CHECKING:  # made by fast_path: _give_fast_path gives them to Block (below) and to a subclass on its own pair

        def __enter__(self) -> _V: ...

        def __exit__(
            self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
        ) -> None: ...

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

    def _below(self) -> Block[Any] | None:
        """The block that owned the value this one displaced (read from the owner token: no extra get at enter)."""
        previous = self._owner_token.old_value
        return None if previous is Token.MISSING else previous

    def _take_snapshot(self) -> None:
        """Record what ``_on_closed`` compares against (only called when ``_snapshots`` is true)."""

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
        above: list[Block[Any]] = []
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


def open_blocks(owner_var: ContextVar[Any] = OWNER_VAR) -> list[Block[Any]]:
    """The blocks open in this context, innermost first."""
    blocks: list[Block[Any]] = []
    block = owner_var.get()
    while block is not None:
        if block._state is OPEN:
            blocks.append(block)
        block = block._below()
    return blocks


_give_fast_path(Block)
