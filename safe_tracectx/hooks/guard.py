"""The guard that ``install()`` puts in place of Thunder's trace ContextVar.

``get`` is the real variable's own bound method (the hot path is untouched);
``set`` makes a :class:`RawBlock` that remembers its call site, and ``reset``
closes it with the same rules as :class:`safe_tracectx.tracectx`.
"""

from __future__ import annotations

from contextvars import ContextVar, Token
from typing import Any, Final

from safe_tracectx import events
from safe_tracectx.callsite import CallSite, find_call_site
from safe_tracectx.context import NEW, OPEN, OWNER_VAR, Block, describe_trace
from safe_tracectx.policy import act

__all__ = ["GuardedTraceVar", "RawBlock", "close_raw_blocks", "open_blocks"]

_RAW_FIX: Final = (
    "reset every set_tracectx() in a `finally` (or use `with tracectx(trace):`); "
    "`safe-tracectx lint` finds the unguarded sets"
)


class RawBlock(Block):
    """A ``set_tracectx(trace)`` made while installed; Thunder gets it back as the token."""

    __slots__ = ("_site",)

    def __init__(self, trace: Any, site: CallSite | None) -> None:
        self._trace = trace
        self._site = site
        self._state = NEW

    @property
    def var(self) -> ContextVar[Any]:
        """The real ContextVar (as ``Token.var``)."""
        return self._trace_token.var

    @property
    def old_value(self) -> Any:
        """The value before the set (as ``Token.old_value``)."""
        return self._trace_token.old_value

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
            return
        problem = self._deactivate_slow()
        if problem is not None:
            act(self._unbalanced(problem, _RAW_FIX))


class GuardedTraceVar:
    """Stands in for ``thunder.core.trace._tracectx`` while installed."""

    __slots__ = ("real_var", "get", "name")

    def __init__(self, real_var: ContextVar[Any]) -> None:
        self.real_var = real_var
        self.get = real_var.get  # the hot path: the real variable's own method
        self.name = real_var.name

    def set(self, value: Any) -> RawBlock:
        block = RawBlock(value, find_call_site())
        block._activate()
        if events.sinks:
            events.emit("trace_set", trace=value, site=block._site, block=id(block))
        return block

    def reset(self, token: RawBlock | Token[Any]) -> None:
        if type(token) is RawBlock:
            token.close()
        else:  # a token made before install()
            self.real_var.reset(token)  # type: ignore[arg-type]

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
    """Close the open raw sets with these ids (a leak's clean-up); return them.

    Innermost first, so each close restores what was active before it.
    """
    leaked = [b for b in open_blocks() if isinstance(b, RawBlock) and id(b) in block_ids]
    for block in leaked:
        block.close()
    return leaked
