"""The guard that ``install()`` puts in place of Thunder's trace ContextVar.

``get`` is the real variable's own bound method (the hot path is untouched);
``set`` makes a :class:`RawBlock` that remembers its call site and returns the
real ``Token`` (so a token reset after ``uninstall()`` still works), and
``reset`` closes the token's block with the same rules as :class:`safe_tracectx.tracectx`.
"""

from __future__ import annotations

from contextvars import ContextVar, Token
from typing import Any, Final

from safe_tracectx import events
from safe_tracectx.callsite import CallSite, find_call_site
from safe_tracectx.context import ENDED, NEW, OPEN, ORPHANED, OWNER_VAR, Block, describe_trace
from safe_tracectx.policy import act

__all__ = ["GuardedTraceVar", "RawBlock", "close_raw_blocks", "open_blocks", "raw_block_of"]

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


class GuardedTraceVar:
    """Stands in for ``thunder.core.trace._tracectx`` while installed."""

    __slots__ = ("real_var", "get", "name")

    def __init__(self, real_var: ContextVar[Any]) -> None:
        self.real_var = real_var
        self.get = real_var.get  # the hot path: the real variable's own method
        self.name = real_var.name

    def set(self, value: Any) -> Token[Any]:
        block = RawBlock(value, find_call_site())
        block._activate()
        _blocks_by_token[id(block._trace_token)] = block
        if events.sinks:
            events.emit("trace_set", trace=value, site=block._site, block=id(block))
        return block._trace_token

    def reset(self, token: Token[Any]) -> None:
        block = raw_block_of(token)
        if block is None:  # a token made before install()
            self.real_var.reset(token)
        else:
            block.close()

    def __repr__(self) -> str:
        return f"<safe_tracectx guard of {self.real_var!r}>"


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
