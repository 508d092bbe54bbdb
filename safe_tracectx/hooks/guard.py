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
import sys
import threading
import weakref
from contextvars import Token
from typing import Any, ClassVar, Final

from safe_tracectx._support import events
from safe_tracectx._support.callsite import CallSite, find_call_site
from safe_tracectx._support.labels import describe_trace
from safe_tracectx.context.blocks import ENDED, OWNER_VAR, TRACE_VAR, Block, open_blocks
from safe_tracectx.errors import FIXES, TraceContextError, UnbalancedContextError
from safe_tracectx.hooks import faults
from safe_tracectx.policy.actions import act

__all__ = [
    "RawBlock",
    "abandoned_sets",
    "close_leaked",
    "guarded_reset_tracectx",
    "guarded_set_tracectx",
    "next_serial",
    "open_blocks",
    "open_raw_blocks",
    "raw_block_of",
    "release_all",
]

#: The open (or force-closed) raw sets, by ``id()`` of the real token Thunder holds
#: (tokens are not hashable; each block keeps its token alive, so the id stays its own).
_blocks_by_token: Final[dict[int, RawBlock]] = {}
_serials: Final = itertools.count()


class RawBlock(Block[Any]):
    """A ``set_tracectx(trace)`` made while installed, found again by its token."""

    __slots__ = ("_site", "_serial", "_thread", "_task", "_task_name")

    unbalanced_fix: ClassVar[str] = FIXES["raw_set"]

    def __init__(self, trace: Any, site: CallSite | None) -> None:
        Block.__init__(self, trace)
        self._site = site
        self._serial = next(_serials)
        self._thread = threading.current_thread()
        self._task, self._task_name = _running_task()

    @property
    def token(self) -> Token[Any]:
        """The real token that ``set_tracectx`` returned."""
        return self._value_token

    @property
    def site(self) -> CallSite | None:
        """Where ``set_tracectx`` was called."""
        return self._site

    @property
    def thread(self) -> str:
        """The name of the thread that made the set."""
        return self._thread.name

    @property
    def thread_alive(self) -> bool:
        """Whether the thread that made the set still runs (and so may still reset it)."""
        return self._thread.is_alive()

    @property
    def abandoned(self) -> bool:
        """Whether nothing can reset this open set any more: its thread has ended, its asyncio task is done, or
        (made on this thread outside a task, and not open in this Context) the Context it was made in has finished
        (a ``copy_context().run``). A running thread, or a task not done, may still reset it."""
        if not self.thread_alive:
            return True
        if self._task is not None:
            task = self._task()
            return task is None or task.done()
        return self._thread is threading.current_thread() and self not in open_blocks()

    def where(self) -> str:
        """What the set was made in, for a report: its asyncio task, else its thread when it has ended, else the
        Context it ran in."""
        if self._task_name is not None:
            return f"asyncio task {self._task_name!r} (thread {self.thread!r})"
        if not self.thread_alive:
            return f"thread {self.thread!r}"
        return f"a Context thread {self.thread!r} no longer runs (a copy_context().run that returned)"

    @property
    def serial(self) -> int:
        """The order in which the sets of this process were made."""
        return self._serial

    def label(self) -> str:
        where = f" at {self._site}" if self._site is not None else ""
        return f"set_tracectx({describe_trace(self._value)}){where}"

    def close(self) -> None:
        """The ``reset_tracectx(token)`` of this set."""
        if events.sinks:
            events.emit("trace_reset", trace=self._value, site=find_call_site(), block=id(self), set_site=self._site)
        try:  # in flight: a reset in a `finally` while a KeyboardInterrupt or GeneratorExit propagates
            self.__exit__(None, sys.exc_info()[1], None)
        finally:  # also when the policy raised what the exit found
            if self._state is ENDED:
                _blocks_by_token.pop(id(self._value_token), None)


def _running_task() -> tuple[weakref.ReferenceType[Any] | None, str | None]:
    """The asyncio task running in this thread, weakly, and its name ((None, None): none; found cheaply when asyncio
    is not even imported)."""
    asyncio = sys.modules.get("asyncio")
    if asyncio is None or asyncio.events._get_running_loop() is None:
        return None, None
    task = asyncio.current_task()
    return (None, None) if task is None else (weakref.ref(task), task.get_name())


def abandoned_sets(*, since: int = 0, exempt: tuple[range, ...] = ()) -> list[RawBlock]:
    """The raw sets still open, made from serial ``since`` on and not in an ``exempt`` range of serials, that
    nothing can reset any more (:attr:`RawBlock.abandoned`), oldest first; each is no longer tracked (reported
    once: a later reset of it, should its Context run again, is Thunder's own)."""
    found = [block for block in open_raw_blocks(since=since)
             if block.abandoned and not any(block.serial in serials for serials in exempt)]
    for block in found:
        block.release()
        _blocks_by_token.pop(id(block._value_token), None)
    return found


def next_serial() -> int:
    """The serial the next set will get (an installation's sets are those from here on)."""
    return next(_serials)


def guarded_set_tracectx(ctx: Any) -> Token[Any]:
    """Sets the current trace context (checked by safe_tracectx: see ``reset_tracectx``)."""
    if faults.injector is not None:
        faults.point("set", events.current_pass.get())
    block = RawBlock(ctx, find_call_site())
    block.__enter__()
    _blocks_by_token[id(block._value_token)] = block
    if events.sinks:
        events.emit("trace_set", trace=ctx, site=block._site, block=id(block))
    return block._value_token


def _foreign_reset(token: Token[Any]) -> None:
    """Reset a token this guard did not hand out (made before install(), or already reset)."""
    if not isinstance(token, Token) or token.var is not TRACE_VAR:
        TRACE_VAR.reset(token)  # not a trace token at all: Python's own error
        return
    top = OWNER_VAR.get()
    if top is not None and top.is_open and TRACE_VAR.get(None) is top._value:
        problem = (
            f"was called with a token made before install() while {top.label()} is active: resetting it "
            "now would end that block's trace under it; nothing was changed"
        )
        error = UnbalancedContextError(f"reset_tracectx() {problem}", fix=FIXES["raw_set"], site=find_call_site())
        act(error, in_flight=sys.exc_info()[1])
        return
    try:
        TRACE_VAR.reset(token)
    except RuntimeError:
        problem = "was called with a token that was already reset; nothing was changed"
    except ValueError:
        problem = "was called in another thread or Context than its set_tracectx(); nothing was changed"
    else:
        return
    error = UnbalancedContextError(f"reset_tracectx() {problem}", fix=FIXES["raw_set"], site=find_call_site())
    act(error, in_flight=sys.exc_info()[1])


def guarded_reset_tracectx(token: Token[Any]) -> None:
    """Resets the tracing context; an out-of-order, repeated or foreign reset is reported per the policy."""
    block = raw_block_of(token)
    if block is None:
        _foreign_reset(token)
    else:
        block.close()


def close_leaked(
    *, since: int = 0, block_ids: set[int] | None = None
) -> tuple[list[RawBlock], list[TraceContextError]]:
    """Close the raw sets open in this context made from serial ``since`` on (or with these ids).

    Innermost first, so each close restores what was active before it. Returns
    them (the caller reports them as one leak; their owners' later resets are
    silent while installed) and what closing found besides (a read-only block
    closed with them).
    """
    leaked = [
        b
        for b in open_blocks()
        if isinstance(b, RawBlock) and b._serial >= since and (block_ids is None or id(b) in block_ids)
    ]
    found: list[TraceContextError] = []
    for block in leaked:
        if block.is_open:
            found += [e for e in block.close_as_cleanup() if not isinstance(e, UnbalancedContextError)]
    return leaked, found


def open_raw_blocks(*, since: int = 0) -> list[RawBlock]:
    """The raw sets open in any thread or Context, made from serial ``since`` on, oldest first."""
    return sorted((b for b in _blocks_by_token.values() if b.is_open and b._serial >= since), key=lambda b: b._serial)


def release_all() -> None:
    """The hooks are gone: stop tracking every raw set (later resets go to Thunder's own reset)."""
    for block in _blocks_by_token.values():
        block.release()
    _blocks_by_token.clear()


def raw_block_of(token: Token[Any]) -> RawBlock | None:
    """The block of a token that ``set_tracectx`` returned while installed (None otherwise)."""
    block = _blocks_by_token.get(id(token))
    return block if block is not None and block._value_token is token else None
