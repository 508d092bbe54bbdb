"""The guarded ``set_tracectx``/``reset_tracectx`` that ``install()`` puts in place of Thunder's.

Thunder's ContextVar and ``get_tracectx`` (the hot path) are left untouched.
``guarded_set_tracectx`` makes a :class:`RawBlock` that remembers its call site and
returns the real ``Token`` (so a token reset after ``uninstall()`` still works);
``guarded_reset_tracectx`` closes the token's block with the same rules as
:class:`safe_tracectx.tracectx`.
"""

from __future__ import annotations

from contextvars import Token
from typing import Any, Final

from safe_tracectx import events
from safe_tracectx.callsite import CallSite, find_call_site
from safe_tracectx.context import ENDED, NEW, OPEN, ORPHANED, OWNER_VAR, TRACE_VAR, Block, describe_trace
from safe_tracectx.policy import act

__all__ = [
    "RawBlock",
    "close_raw_blocks",
    "guarded_reset_tracectx",
    "guarded_set_tracectx",
    "open_blocks",
    "raw_block_of",
]

_RAW_FIX: Final = (
    "reset every set_tracectx() in a `finally` (or use `with tracectx(trace):`); "
    "`safe-tracectx lint` finds the unguarded sets"
)


#: The open (or force-closed) raw sets, by ``id()`` of the real token Thunder holds
#: (tokens are not hashable; each block keeps its token alive, so the id stays its own).
_blocks_by_token: dict[int, RawBlock] = {}


class RawBlock(Block):
    """A ``set_tracectx(trace)`` made while installed, found again by its token."""

    __slots__ = ("_site",)

    def __init__(self, trace: Any, site: CallSite | None) -> None:
        self._trace = trace
        self._site = site
        self._state = NEW

    @property
    def token(self) -> Token[Any]:
        """The real token that ``set_tracectx`` returned."""
        return self._trace_token

    @property
    def site(self) -> CallSite | None:
        """Where ``set_tracectx`` was called."""
        return self._site

    def _label(self) -> str:
        where = f" at {self._site}" if self._site is not None else ""
        return f"set_tracectx({describe_trace(self._trace)}){where}"

    def close(self) -> None:
        """The ``reset_tracectx(token)`` of this set."""
        if events.sinks:
            events.emit("trace_reset", trace=self._trace, site=find_call_site(), block=id(self), set_site=self._site)
        if self._deactivate_fast():
            _blocks_by_token.pop(id(self._trace_token), None)
            return
        problem = self._deactivate_slow()
        if self._state is ENDED:
            _blocks_by_token.pop(id(self._trace_token), None)
        if problem is not None:
            act(self._unbalanced(problem, _RAW_FIX))

    def force_close(self) -> None:
        """Close a leaked set as its enclosing block would; the owner's own later reset is then silent."""
        self._deactivate_slow()
        self._state = ORPHANED


def guarded_set_tracectx(ctx: Any) -> Token[Any]:
    """Sets the current trace context (checked by safe_tracectx: see ``reset_tracectx``)."""
    block = RawBlock(ctx, find_call_site())
    block._activate()
    _blocks_by_token[id(block._trace_token)] = block
    if events.sinks:
        events.emit("trace_set", trace=ctx, site=block._site, block=id(block))
    return block._trace_token


def guarded_reset_tracectx(token: Token[Any]) -> None:
    """Resets the tracing context; an out-of-order, repeated or foreign reset is reported per the policy."""
    block = raw_block_of(token)
    if block is None:  # a token made before install()
        TRACE_VAR.reset(token)
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


def close_raw_blocks(block_ids: set[int]) -> list[RawBlock]:
    """Close the open raw sets with these ids (a leak's clean-up, reported elsewhere); return them.

    Innermost first, so each close restores what was active before it.
    """
    leaked = [b for b in open_blocks() if isinstance(b, RawBlock) and id(b) in block_ids]
    for block in leaked:
        block.force_close()
    return leaked


def raw_block_of(token: Token[Any]) -> RawBlock | None:
    """The block of a token that ``set_tracectx`` returned while installed (None otherwise)."""
    block = _blocks_by_token.get(id(token))
    return block if block is not None and block._trace_token is token else None
