"""The guarded ``set_tracectx``/``reset_tracectx`` that ``install()`` puts in place of Thunder's.

Thunder's ContextVar and ``get_tracectx`` (the hot path) are left untouched.
``guarded_set_tracectx`` makes a :class:`RawBlock` that remembers its call site and
returns the real ``Token`` (so a token reset after ``uninstall()`` still works);
``guarded_reset_tracectx`` closes the token's block with the block rules of
:mod:`safe_tracectx.context.blocks`::

    >>> from thunder.core.trace import TraceCtx, get_tracectx
    >>> from safe_tracectx.hooks.guard import guarded_reset_tracectx, guarded_set_tracectx
    >>> token = guarded_set_tracectx(TraceCtx())
    >>> guarded_reset_tracectx(token)
    >>> get_tracectx() is None
    True
"""

from __future__ import annotations

import itertools
from contextvars import Token
from typing import Any, ClassVar, Final

from safe_tracectx import events
from safe_tracectx.actions import act
from safe_tracectx.callsite import CallSite, find_call_site
from safe_tracectx.context.blocks import ENDED, OPEN, ORPHANED, OWNER_VAR, RELEASED, TRACE_VAR, Block
from safe_tracectx.errors import FIXES, TraceContextError, UnbalancedContextError
from safe_tracectx.hooks import faults
from safe_tracectx.labels import describe_trace

__all__ = [
    "RawBlock",
    "close_leaked",
    "guarded_reset_tracectx",
    "guarded_set_tracectx",
    "next_serial",
    "open_blocks",
    "raw_block_of",
    "release_all",
]

#: The open (or force-closed) raw sets, by ``id()`` of the real token Thunder holds
#: (tokens are not hashable; each block keeps its token alive, so the id stays its own).
_blocks_by_token: Final[dict[int, RawBlock]] = {}
_serials: Final = itertools.count()


class RawBlock(Block):
    """A ``set_tracectx(trace)`` made while installed, found again by its token."""

    __slots__ = ("_site", "_serial")

    unbalanced_fix: ClassVar[str] = FIXES["raw_set"]

    def __init__(self, trace: Any, site: CallSite | None) -> None:
        Block.__init__(self, trace)
        self._site = site
        self._serial = next(_serials)

    @property
    def token(self) -> Token[Any]:
        """The real token that ``set_tracectx`` returned."""
        return self._value_token

    @property
    def site(self) -> CallSite | None:
        """Where ``set_tracectx`` was called."""
        return self._site

    @property
    def serial(self) -> int:
        """The order in which the sets of this process were made."""
        return self._serial

    def _label(self) -> str:
        where = f" at {self._site}" if self._site is not None else ""
        return f"set_tracectx({describe_trace(self._value)}){where}"

    def close(self) -> None:
        """The ``reset_tracectx(token)`` of this set."""
        if events.sinks:
            events.emit("trace_reset", trace=self._value, site=find_call_site(), block=id(self), set_site=self._site)
        if self._deactivate_fast():
            _blocks_by_token.pop(id(self._value_token), None)
            return
        errors = self._close()
        if self._state is ENDED:
            _blocks_by_token.pop(id(self._value_token), None)
        for error in errors:
            act(error)

    def force_close(self) -> list[TraceContextError]:
        """Close a leaked set as its enclosing block would; the owner's own later reset is then silent."""
        return self._close(orphan=True)


def next_serial() -> int:
    """The serial the next set will get (an installation's sets are those from here on)."""
    return next(_serials)


def guarded_set_tracectx(ctx: Any) -> Token[Any]:
    """Sets the current trace context (checked by safe_tracectx: see ``reset_tracectx``)."""
    if faults.injector is not None:
        faults.point("set", events.current_pass.get())
    block = RawBlock(ctx, find_call_site())
    block._activate()
    _blocks_by_token[id(block._value_token)] = block
    if events.sinks:
        events.emit("trace_set", trace=ctx, site=block._site, block=id(block))
    return block._value_token


def _foreign_reset(token: Token[Any]) -> None:
    """Reset a token this guard did not hand out (made before install(), or already reset)."""
    if not isinstance(token, Token) or token.var is not TRACE_VAR:
        TRACE_VAR.reset(token)  # not a trace token at all: Python's own error
        return
    try:
        TRACE_VAR.reset(token)
    except RuntimeError:
        problem = "was called with a token that was already reset; nothing was changed"
    except ValueError:
        problem = "was called in another thread or Context than its set_tracectx(); nothing was changed"
    else:
        return
    act(UnbalancedContextError(f"reset_tracectx() {problem}", fix=FIXES["raw_set"], site=find_call_site()))


def guarded_reset_tracectx(token: Token[Any]) -> None:
    """Resets the tracing context; an out-of-order, repeated or foreign reset is reported per the policy."""
    block = raw_block_of(token)
    if block is None:
        _foreign_reset(token)
    else:
        block.close()


def open_blocks() -> list[Block]:
    """The blocks open in this context, innermost first (leaked raw sets show up here)."""
    blocks: list[Block] = []
    block = OWNER_VAR.get()
    while block is not None:
        if block._state is OPEN:
            blocks.append(block)
        block = block._prev_owner
    return blocks


def close_leaked(*, since: int = 0, block_ids: set[int] | None = None) -> list[RawBlock]:
    """Close the raw sets open in this context made from serial ``since`` on (or with these ids); return them.

    Innermost first, so each close restores what was active before it. The
    caller reports them; their owners' later resets are silent.
    """
    leaked = [
        b
        for b in open_blocks()
        if isinstance(b, RawBlock) and b._serial >= since and (block_ids is None or id(b) in block_ids)
    ]
    for block in leaked:
        if block._state is OPEN:
            block.force_close()
    return leaked


def release_all() -> None:
    """The hooks are gone: stop tracking every raw set (later resets go to Thunder's own reset)."""
    for block in _blocks_by_token.values():
        if block._state is OPEN or block._state is ORPHANED:
            block._state = RELEASED
    _blocks_by_token.clear()


def raw_block_of(token: Token[Any]) -> RawBlock | None:
    """The block of a token that ``set_tracectx`` returned while installed (None otherwise)."""
    block = _blocks_by_token.get(id(token))
    return block if block is not None and block._value_token is token else None
