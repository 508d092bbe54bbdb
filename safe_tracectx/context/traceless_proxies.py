"""``traceless``: proxies owned by no trace, for exploring and calling meta functions.

Names come from one process-wide counter, so they never repeat; recording a
Thunder operation raises ``TracelessRecordingError``::

    >>> from thunder.core.proxies import TensorProxy
    >>> from thunder.core.devices import cpu
    >>> from thunder.core.dtypes import float32
    >>> from safe_tracectx import traceless, is_traceless
    >>> with traceless():
    ...     a = TensorProxy(shape=(1,), device=cpu, dtype=float32)
    >>> a.name.startswith("t"), is_traceless(a)
    (True, True)
"""

from __future__ import annotations

import itertools
import sys
from collections.abc import Iterable
from types import FrameType
from typing import Any, ClassVar, Final

from thunder.core.proxies import Proxy, TensorProxy
from thunder.core.trace import TraceCtx

from safe_tracectx._support.arguments import expect_name, expect_shape, to_device, to_dtype
from safe_tracectx._support.callsite import find_call_site, find_frame
from safe_tracectx.context.active_trace import tracectx
from safe_tracectx.errors import FIXES, TracelessRecordingError

__all__ = ["TracelessTrace", "is_traceless", "traceless", "traceless_proxies_made", "traceless_tensorproxy"]

_traceless_counter = itertools.count()
_TRACELESS_MARK: Final = "_safe_tracectx_traceless"
_PROXY_INIT_CODE: Final = Proxy.__init__.__code__
_traceless_made = False  # has any proxy been marked traceless in this process?


def traceless_proxies_made() -> bool:
    """False until the first traceless proxy is made (checks skip the per-proxy lookup until then)."""
    return _traceless_made


def _in_proxy_init(frame: FrameType) -> bool:
    return frame.f_code is _PROXY_INIT_CODE


def _mark_new_proxy(frame: FrameType | None) -> None:
    """Mark the proxy whose ``Proxy.__init__`` is on the stack as traceless."""
    global _traceless_made
    _traceless_made = True
    init = find_frame(_in_proxy_init, frame, limit=6)
    proxy = init.f_locals.get("self") if init is not None else None
    if proxy is not None:
        proxy.__dict__[_TRACELESS_MARK] = True


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
            fix=FIXES["traceless_recording"],
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

    describe_as: ClassVar[str] = "the traceless naming context"
    describe_without_id: ClassVar[bool] = True

    def __init__(self) -> None:
        TraceCtx.__init__(self)
        # What the bound_symbols setter does, without its property call and assert (one per traceless block).
        self._bound_symbols = self.scopes[0] = _RefusingList()

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
    """Explicitly allow proxies owned by no trace (see the module's example)."""

    __slots__ = ()

    def __init__(self) -> None:
        tracectx.__init__(self, TracelessTrace())

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
    where = "traceless_tensorproxy()"
    dims = expect_shape(shape, where)
    thunder_device, thunder_dtype = to_device(device, where), to_dtype(dtype, where)
    if name is not None:
        expect_name(name, where)
    with traceless():
        return TensorProxy(name, shape=dims, device=thunder_device, dtype=thunder_dtype, requires_grad=requires_grad)
