"""Context managers for Thunder's active trace, backed by Thunder's own ContextVar.

Thunder code running inside a block sees the trace (``get_tracectx()``),
every exit restores what was active before the matching enter, and misuse
is reported per the policy::

    >>> from thunder.core.trace import TraceCtx, get_tracectx
    >>> from safe_tracectx import tracectx, scratch_trace
    >>> trace = TraceCtx()
    >>> with tracectx(trace) as active:
    ...     get_tracectx() is trace is active
    True
    >>> with scratch_trace(trace) as scratch:
    ...     name = scratch.make_name()
    >>> name in trace.names
    False

How blocks are kept: each block remembers the value it displaced (its
token's ``old_value``) and the block that owned that value (``_OWNER``, a
ContextVar beside Thunder's). Exiting a block that is in the active chain
closes it and every block still open above it, and restores the nearest
value below it whose block has not ended. Exiting a block that is no longer
in the chain changes nothing. So no exit re-activates an ended block's trace.
"""

from __future__ import annotations

import functools
import itertools
import sys
from collections.abc import Callable, Iterable
from contextvars import ContextVar, Token
from types import FrameType, TracebackType
from typing import Any, Final, Generic, TypeVar

import thunder.core.trace as _thunder_trace
from thunder.core.proxies import Proxy, TensorProxy
from thunder.core.trace import TraceCtx

from safe_tracectx.callsite import CallSite, find_call_site
from safe_tracectx.errors import (
    MissingTraceError,
    NameClashError,
    ReadOnlyTraceError,
    TraceContextError,
    TracelessRecordingError,
    UnbalancedContextError,
)
from safe_tracectx.policy import act, get_policy

__all__ = [
    "MISSING_TRACE_FIX",
    "ScratchTrace",
    "TracelessTrace",
    "current_trace",
    "describe_trace",
    "is_traceless",
    "require_trace",
    "scratch_trace",
    "traceless",
    "traceless_tensorproxy",
    "tracectx",
]

#: Thunder's trace ContextVar (never replaced: ``install()`` hooks set/reset, not the variable).
TRACE_VAR: Final[ContextVar[Any]] = _thunder_trace._tracectx
#: The block that set the value now in TRACE_VAR (None: no block of ours).
OWNER_VAR: Final[ContextVar[Block | None]] = ContextVar("safe_tracectx.owner", default=None)

# Bound methods, looked up once: the enter/exit fast path is a handful of calls.
_trace_get = TRACE_VAR.get
_trace_set = TRACE_VAR.set
_trace_reset = TRACE_VAR.reset
_owner_get = OWNER_VAR.get
_owner_set = OWNER_VAR.set
_owner_reset = OWNER_VAR.reset

# Block states.
NEW: Final = 0
OPEN: Final = 1
ENDED: Final = 2
ORPHANED: Final = 3  # closed by an enclosing block's exit; its own exit is then silent

MISSING_TRACE_FIX: Final = (
    "make the owning trace active with `with tracectx(trace):`; to only borrow a namer, "
    "use `with scratch_trace(*traces_to_avoid) as scratch:`; for a proxy owned by no trace, "
    "opt in with `with traceless():` or traceless_tensorproxy(...)"
)

_B = TypeVar("_B", bound="Block")
_T = TypeVar("_T", bound="TraceCtx | None")
_F = TypeVar("_F", bound=Callable[..., Any])


def describe_trace(trace: object) -> str:
    """A short, human description of a trace (or of None / a non-trace)."""
    if trace is None or trace is Token.MISSING:
        return "no trace"
    if isinstance(trace, TracelessTrace):
        return "the traceless naming context"
    if isinstance(trace, TraceCtx):
        kind = "scratch trace" if isinstance(trace, ScratchTrace) else "trace"
        fn = getattr(trace.fn, "__qualname__", None) or getattr(trace.fn, "__name__", None)
        label = f" of {fn}" if fn else ""
        return (
            f"{kind}{label} @{id(trace):#x} "
            f"({len(trace.bound_symbols)} bound symbols, {len(trace.names)} names)"
        )
    return f"{type(trace).__name__} {trace!r:.60}"


class Block:
    """One activation of a trace: made by ``tracectx`` or by a guarded ``set_tracectx``."""

    __slots__ = ("_trace", "_state", "_trace_token", "_owner_token", "_prev_owner")

    _trace: Any
    _state: int
    _trace_token: Token[Any]
    _owner_token: Token[Block | None]
    _prev_owner: Block | None

    def _label(self) -> str:
        """How a report names this block, e.g. ``tracectx(trace of f @0x...)``."""
        return f"{type(self).__name__}({describe_trace(self._trace)})"

    def _activate(self) -> None:
        self._prev_owner = _owner_get()
        self._trace_token = _trace_set(self._trace)
        self._owner_token = _owner_set(self)
        self._state = OPEN

    def _deactivate_fast(self) -> bool:
        """Close the block if it is on top and nothing is amiss; False means: take the slow path."""
        if _owner_get() is self and _trace_get(None) is self._trace and self._state is OPEN:
            prev = self._prev_owner
            if prev is None or prev._state is OPEN:
                try:
                    _trace_reset(self._trace_token)
                except ValueError:  # entered in another Context
                    return False
                _owner_reset(self._owner_token)
                self._state = ENDED
                return True
        return False

    def _deactivate_slow(self) -> str | None:
        """Close the block whatever the state; return what was wrong (None: nothing)."""
        state = self._state
        if state is NEW:
            return "was exited without being entered"
        if state is ORPHANED:
            self._state = ENDED
            return None
        if state is ENDED:
            return "was exited a second time"

        above: list[Block] = []
        block = _owner_get()
        while block is not None and block is not self:
            above.append(block)
            block = block._prev_owner
        self._state = ENDED
        if block is None:
            return (
                "was exited where it is not the active block: it was entered in another thread or "
                "Context (an asyncio task, copy_context().run, a generator resumed elsewhere), "
                "or an enclosing block already ended"
            )
        value_before = _trace_get(None)
        try:
            _trace_reset(self._trace_token)
        except ValueError:
            return (
                "was exited in a different Context than it was entered in (another thread, "
                "asyncio task or copy_context().run); it stays active in the Context that entered it"
            )
        _owner_reset(self._owner_token)
        prev = self._prev_owner
        if prev is not None and prev._state is not OPEN:
            value, owner = prev._restore_target()
            _trace_set(value)
            _owner_set(owner)

        still_open = [b for b in above if b._state is OPEN]
        for b in still_open:
            b._state = ORPHANED
        if still_open:
            inner = "; ".join(b._label() for b in reversed(still_open))
            return f"was exited while blocks entered inside it were still open: {inner}. They were closed with it"
        if value_before is not self._trace:
            return (
                f"was exited while an inner set_tracectx() was never reset (it left "
                f"{describe_trace(value_before)} active); that trace was deactivated"
            )
        return None

    def _restore_target(self) -> tuple[Any, Block | None]:
        """What to activate in place of this ended block: the nearest value below whose block is open."""
        value: Any = self._trace_token.old_value
        owner = self._prev_owner
        while owner is not None and owner._state is not OPEN:
            value = owner._trace_token.old_value
            owner = owner._prev_owner
        return (None if value is Token.MISSING else value), owner

    def _unbalanced(self, problem: str, fix: str) -> UnbalancedContextError:
        return UnbalancedContextError(f"{self._label()} {problem}", fix=fix, site=find_call_site())


_UNBALANCED_FIX: Final = (
    "enter and exit trace contexts in nested order in one thread/task: use `with tracectx(...)` "
    "(or try/finally around set_tracectx/reset_tracectx), and exit each block exactly once"
)


class _Snapshot:
    """A read-only trace's state at entry, to diff and restore at exit."""

    __slots__ = ("names", "names_copy", "counters", "bsyms", "bsyms_copy", "scopes", "scopes_copy", "objects")

    def __init__(self, trace: TraceCtx) -> None:
        self.names: set[str] = trace.names
        self.names_copy = set(trace.names)
        self.counters = (trace.name_ctr, trace.obj_name_ctr)
        self.bsyms: list[Any] = trace._bound_symbols
        self.bsyms_copy = list(self.bsyms)
        self.scopes: list[Any] = trace.scopes
        self.scopes_copy = list(self.scopes)
        self.objects = dict(trace._object_ctx)

    def restore(self, trace: TraceCtx) -> tuple[list[str], list[Any]]:
        """Put ``trace`` back as it was; return the names and bound symbols that were added."""
        added_names = sorted((trace.names | self.names) - self.names_copy)
        known = {id(b) for b in self.bsyms_copy}
        added_bsyms = [b for b in trace.bound_symbols if id(b) not in known]
        if added_names or trace.names is not self.names or len(self.names) != len(self.names_copy):
            self.names.clear()
            self.names.update(self.names_copy)
            trace.names = self.names
        trace.name_ctr, trace.obj_name_ctr = self.counters
        self.bsyms[:] = self.bsyms_copy
        self.scopes[:] = self.scopes_copy
        trace.scopes = self.scopes
        trace._bound_symbols = self.bsyms
        if trace._object_ctx != self.objects:
            trace._object_ctx.clear()
            trace._object_ctx.update(self.objects)
        return added_names, added_bsyms


def _preview(items: list[str], limit: int = 8) -> str:
    shown = ", ".join(items[:limit])
    return shown + (f", ... ({len(items) - limit} more)" if len(items) > limit else "")


class tracectx(Block, Generic[_T]):
    """Make ``trace`` (a ``TraceCtx``, or None for "explicitly no trace") the active trace.

    Restores the previous trace on every exit path. Also a decorator (a fresh
    block per call). With ``read_only=True``, names or bound symbols added to
    ``trace`` inside the block are a violation (``Policy.read_only``) and are
    removed again at exit::

        >>> from thunder.core.trace import TraceCtx
        >>> from safe_tracectx import tracectx, use_policy
        >>> trace = TraceCtx()
        >>> with use_policy("strict", read_only="ignore"):
        ...     with tracectx(trace, read_only=True):
        ...         _ = trace.make_name()
        >>> len(trace.names)
        0
    """

    __slots__ = ("_read_only", "_snapshot")

    def __init__(self, trace: _T, *, read_only: bool = False) -> None:
        if trace is not None and not isinstance(trace, TraceCtx):
            raise TypeError(
                f"{type(self).__name__}() takes a thunder TraceCtx or None, got "
                f"{type(trace).__name__} ({trace!r:.60}); pass the trace object itself"
            )
        self._init_block(trace, read_only=read_only)

    def _init_block(self, trace: _T, *, read_only: bool) -> None:
        """Set up a new, not yet entered block for a trace already checked."""
        self._trace = trace
        self._read_only = bool(read_only)
        self._state = NEW
        self._snapshot: _Snapshot | None = None

    def __enter__(self) -> _T:
        if self._state is not NEW:
            raise TypeError(
                f"this {type(self).__name__}() was already entered; create a new one for each "
                "with-block (or use it as a decorator, which makes one per call)"
            )
        self._prev_owner = _owner_get()
        self._trace_token = _trace_set(self._trace)
        self._owner_token = _owner_set(self)
        self._state = OPEN
        if self._read_only and self._trace is not None:
            self._snapshot = _Snapshot(self._trace)
        trace: _T = self._trace
        return trace

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        # The fast path of Block._deactivate_fast, inlined: this runs on every exit.
        if _owner_get() is self and _trace_get(None) is self._trace and self._state is OPEN:
            prev = self._prev_owner
            if prev is None or prev._state is OPEN:
                try:
                    _trace_reset(self._trace_token)
                except ValueError:
                    pass
                else:
                    _owner_reset(self._owner_token)
                    self._state = ENDED
                    if self._snapshot is not None:
                        self._check_read_only()
                    return
        problem = self._deactivate_slow()
        errors: list[TraceContextError] = []
        if problem is not None:
            errors.append(self._unbalanced(problem, _UNBALANCED_FIX))
        if self._snapshot is not None:
            errors.extend(self._read_only_errors())
        for error in errors:
            act(error)

    def _check_read_only(self) -> None:
        for error in self._read_only_errors():
            act(error)

    def _read_only_errors(self) -> list[TraceContextError]:
        snapshot, self._snapshot = self._snapshot, None
        if snapshot is None:
            return []
        added_names, added_bsyms = snapshot.restore(self._trace)
        if not added_names and not added_bsyms:
            return []
        parts = []
        if added_names:
            parts.append(f"{len(added_names)} name(s) ({_preview(added_names)})")
        if added_bsyms:
            syms = [str(getattr(getattr(b, "sym", None), "name", b)) for b in added_bsyms]
            parts.append(f"{len(added_bsyms)} bound symbol(s) ({_preview(syms)})")
        message = (
            f"read-only {describe_trace(self._trace)} was modified inside "
            f"`with tracectx(trace, read_only=True)`: {' and '.join(parts)} were added; "
            "the trace was restored to its state at entry"
        )
        fix = (
            "do not make a trace active just to borrow its namer: name new proxies in "
            "`with scratch_trace(trace) as scratch:` and commit them with scratch.commit_names(into=...) "
            "(thunder.core.trace.from_trace shares the `names` set, so it modifies the original too)"
        )
        return [ReadOnlyTraceError(message, fix=fix, site=find_call_site())]

    def _clone(self) -> tracectx[_T]:
        return tracectx(self._trace, read_only=self._read_only)

    def __call__(self, func: _F) -> _F:
        clone = self._clone

        @functools.wraps(func)
        def with_trace(*args: Any, **kwargs: Any) -> Any:
            with clone():
                return func(*args, **kwargs)

        return with_trace  # type: ignore[return-value]


_NO_NAMES: Final[tuple[str, ...]] = ()


def _name_tuple(names: Iterable[str]) -> tuple[str, ...]:
    """``names=`` as a tuple of str, or a TypeError that names what was passed."""
    if isinstance(names, str):
        raise TypeError(
            f"scratch_trace(names=...) takes an iterable of names, got str ({names!r:.60}); write names=[{names!r:.40}]"
        )
    try:
        result = tuple(names)
    except TypeError:
        raise TypeError(
            f"scratch_trace(names=...) takes an iterable of names, got {type(names).__name__} ({names!r:.60})"
        ) from None
    for name in result:
        if not isinstance(name, str):
            raise TypeError(f"scratch_trace(names=...) items must be str, got {type(name).__name__} ({name!r:.60})")
    return result


class ScratchTrace(TraceCtx):
    """A fresh, empty trace used as a namer; its names avoid the reserved ones.

    ``created_names`` lists the names it handed out, and ``commit_names(into=trace)``
    registers them in a destination trace.
    """

    def __init__(self, reserved: Iterable[str] = ()) -> None:
        super().__init__(None)
        self.names = set(reserved)
        self._created: list[str] = []

    @classmethod
    def _owning(cls, names: set[str]) -> ScratchTrace:
        """A scratch trace that takes ``names`` (a set nobody else holds) without copying it."""
        trace = cls.__new__(cls)
        TraceCtx.__init__(trace, None)
        trace.names = names
        trace._created = []
        return trace

    @property
    def created_names(self) -> tuple[str, ...]:
        """The names this scratch trace handed out, in order."""
        return tuple(self._created)

    def add_name(self, name: str) -> None:
        super().add_name(name)
        self._created.append(name)

    def _make_name(self, *, prefix: str | None = None, is_object_name: bool = False, obj: Any | None = None) -> str:
        name: str = super()._make_name(prefix=prefix, is_object_name=is_object_name, obj=obj)
        if not is_object_name:
            self._created.append(name)
        return name

    def commit_names(self, *, into: TraceCtx) -> tuple[str, ...]:
        """Register every created name in ``into``; raise NameClashError (changing nothing) if one is taken."""
        if not isinstance(into, TraceCtx):
            raise TypeError(f"commit_names(into=...) takes a thunder TraceCtx, got {type(into).__name__}")
        taken = [name for name in self._created if name in into.names]
        if taken:
            raise NameClashError(
                f"cannot commit scratch names into {describe_trace(into)}: "
                f"{_preview(taken)} already taken there; nothing was committed",
                fix="reserve the destination when naming: `with scratch_trace(destination, ...)`",
                site=find_call_site(),
            )
        into.names.update(self._created)
        return tuple(self._created)


class scratch_trace(tracectx[ScratchTrace]):
    """Make a fresh :class:`ScratchTrace` active; its names avoid ``reserve`` traces and ``names``.

    The reserve traces are never modified (their ``names`` sets are copied)::

        >>> from thunder.core.trace import TraceCtx
        >>> from safe_tracectx import scratch_trace
        >>> fw, bw = TraceCtx(), TraceCtx()
        >>> fw.names.add("t0")
        >>> with scratch_trace(fw, bw, names=["t1"]) as scratch:
        ...     scratch.make_name(prefix="t")
        't2'
        >>> sorted(fw.names), sorted(bw.names)
        (['t0'], [])
    """

    __slots__ = ("_reserve", "_reserved_names")

    def __init__(self, *reserve: TraceCtx, names: Iterable[str] = _NO_NAMES) -> None:
        reserved: set[str] = set()
        for position, trace in enumerate(reserve):
            if not isinstance(trace, TraceCtx):
                raise TypeError(
                    f"scratch_trace() reserve argument {position} must be a thunder TraceCtx, got "
                    f"{type(trace).__name__} ({trace!r:.60}); to reserve plain names use names=[...]"
                )
            reserved |= trace.names
        reserved_names: tuple[str, ...] = _NO_NAMES
        if names is not _NO_NAMES:
            reserved_names = _name_tuple(names)
            reserved.update(reserved_names)
        self._init_block(ScratchTrace._owning(reserved), read_only=False)
        self._reserve = reserve
        self._reserved_names = reserved_names

    def _clone(self) -> scratch_trace:
        return scratch_trace(*self._reserve, names=self._reserved_names)


_traceless_counter = itertools.count()
_TRACELESS_MARK: Final = "_safe_tracectx_traceless"
_PROXY_INIT_CODE = Proxy.__init__.__code__


_traceless_made = False  # has any proxy been marked traceless in this process?


def traceless_proxies_made() -> bool:
    """False until the first traceless proxy is made (checks skip the per-proxy lookup until then)."""
    return _traceless_made


def _mark_new_proxy(frame: FrameType | None) -> None:
    """Mark the proxy whose ``Proxy.__init__`` is on the stack as traceless."""
    global _traceless_made
    _traceless_made = True
    for _ in range(6):
        if frame is None:
            return
        if frame.f_code is _PROXY_INIT_CODE:
            proxy = frame.f_locals.get("self")
            if proxy is not None:
                proxy.__dict__[_TRACELESS_MARK] = True
            return
        frame = frame.f_back


def is_traceless(proxy: object) -> bool:
    """True if ``proxy`` was made owned by no trace (inside ``traceless()``)."""
    namespace = getattr(proxy, "__dict__", None)
    return bool(namespace and namespace.get(_TRACELESS_MARK, False))


class _RefusingList(list[Any]):
    """The scope of a traceless trace: recording a bound symbol into it raises."""

    def _refuse(self, bsym: object = None) -> None:
        name = getattr(getattr(bsym, "sym", None), "name", None) or "a Thunder operation"
        raise TracelessRecordingError(
            f"{name} tried to record a bound symbol inside traceless(); traceless proxies "
            "belong to no trace, so nothing can be recorded",
            fix="use `with scratch_trace() as trace:` to record operations in a throwaway trace, "
            "or call the meta function directly (for example prims.add.meta(a, b))",
            site=find_call_site(skip_thunder=True),
        )

    def append(self, bsym: object) -> None:
        self._refuse(bsym)

    def extend(self, bsyms: Iterable[object]) -> None:
        self._refuse(next(iter(bsyms), None))

    def insert(self, index: Any, bsym: object) -> None:
        self._refuse(bsym)


class TracelessTrace(TraceCtx):
    """The naming context of ``traceless()``: names from one process-wide counter, no recording."""

    def __init__(self) -> None:
        super().__init__(None)
        self.bound_symbols = _RefusingList()

    def add_name(self, name: str) -> None:
        _mark_new_proxy(sys._getframe(1))

    def has_name(self, name: str) -> bool:
        return False

    def make_name(self, name: str | None = None, *, prefix: str | None = None) -> str:
        _mark_new_proxy(sys._getframe(1))
        if name is not None:
            return name
        return f"{prefix or 't'}{next(_traceless_counter)}"

    def make_object_name(self, x: Any) -> str:
        return f"_object_{next(_traceless_counter)}"

    def add_bound_symbol(self, bsym: Any) -> None:
        self.bound_symbols.append(bsym)


class traceless(tracectx[TracelessTrace]):
    """Explicitly allow proxies owned by no trace, for exploring and calling meta functions.

    Names come from one process-wide counter, so they never repeat; recording
    a Thunder operation raises ``TracelessRecordingError``::

        >>> from thunder.core.proxies import TensorProxy
        >>> from thunder.core.devices import cpu
        >>> from thunder.core.dtypes import float32
        >>> from safe_tracectx import traceless, is_traceless
        >>> with traceless():
        ...     a = TensorProxy(shape=(1,), device=cpu, dtype=float32)
        >>> a.name.startswith("t"), is_traceless(a)
        (True, True)
    """

    __slots__ = ()

    def __init__(self) -> None:
        self._init_block(TracelessTrace(), read_only=False)

    def _clone(self) -> traceless:
        return traceless()


def traceless_tensorproxy(
    *,
    shape: Iterable[int],
    device: Any,
    dtype: Any,
    requires_grad: bool = False,
    name: str | None = None,
) -> TensorProxy:
    """A ``TensorProxy`` owned by no trace (see :class:`traceless`).

    ``device`` and ``dtype`` may be Thunder's or torch's (or a device string)::

        >>> from safe_tracectx import traceless_tensorproxy
        >>> traceless_tensorproxy(shape=(2, 3), device="cpu", dtype="float32").shape
        (2, 3)
    """
    from thunder.core import devices, dtypes

    if isinstance(dtype, str):
        import torch

        dtype = getattr(torch, dtype)
    with traceless():
        return TensorProxy(
            name,
            shape=tuple(shape),
            device=devices.to_device(device),
            dtype=dtypes.to_dtype(dtype),
            requires_grad=requires_grad,
        )


def current_trace() -> TraceCtx | None:
    """The active trace, or None."""
    trace: TraceCtx | None = _trace_get(None)
    return trace


def require_trace(what: str) -> TraceCtx | None:
    """The active trace; if none, apply ``Policy.missing_trace``.

    ``"raise"`` raises MissingTraceError naming ``what``; ``"traceless"`` returns
    a traceless naming context; ``"warn"``/``"log"``/``"ignore"`` report and return None.
    """
    trace: TraceCtx | None = _trace_get(None)
    if trace is not None:
        return trace
    policy = get_policy()
    if policy.missing_trace == "traceless":
        return TracelessTrace()
    act(missing_trace_error(what), policy=policy)
    return None


def missing_trace_error(what: str, site: CallSite | None = None) -> MissingTraceError:
    """The MissingTraceError for ``what`` (e.g. "creating a TensorProxy"), at the user's line."""
    return MissingTraceError(
        f"{what} needs an active trace, but no trace is active",
        fix=MISSING_TRACE_FIX,
        site=site if site is not None else find_call_site(skip_thunder=True),
    )
