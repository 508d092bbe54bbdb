"""The proxies a bound symbol reads and writes, found without filling Thunder's caches.

``BoundSymbol.flat_proxy_args``/``flat_proxy_outs`` are cached properties: the
first read flattens the symbol's arguments with Thunder's pytree (a
``tree_map`` and a ``tree_flatten``) and stores the flat list, its tree spec
and the tuple in the symbol. Checking every pass's output that way flattened
~9,000 symbols per nanoGPT compile that Thunder itself never flattens: ~130
ms, and thousands of lasting objects for the garbage collector to scan. Here a
cache Thunder already filled is read, and otherwise the plain containers are
walked, nothing stored; anything only Thunder's pytree knows how to open (a
dataclass, say) falls back to Thunder's property::

    >>> from thunder.core import devices, dtypes, prims
    >>> from thunder.core.proxies import TensorProxy
    >>> from thunder.core.symbol import BoundSymbol
    >>> from thunder.core.trace import TraceCtx
    >>> from safe_tracectx import tracectx
    >>> with tracectx(TraceCtx()):
    ...     a, b = (TensorProxy(n, shape=(2,), device=devices.cpu, dtype=dtypes.float32) for n in "ab")
    >>> bsym = BoundSymbol(prims.python_return, args=([a, 2.0], {"x": b}), kwargs={}, output=a)
    >>> [p.name for p in proxy_args(bsym)], [p.name for p in proxy_outs(bsym)], "flat_proxy_args" in bsym.__dict__
    (['a', 'b'], ['a'], False)
"""

from __future__ import annotations

from safe_tracectx.extras import require_thunder

require_thunder("safe_tracectx.bound_proxies")

import types
from typing import Any, Final

import torch
from thunder.core import devices, dtypes
from thunder.core.proxies import Proxy

__all__ = ["proxy_args", "proxy_outs"]

#: Types Thunder's pytree keeps as leaves that cannot hold a proxy.
_LEAVES: Final[frozenset[type]] = frozenset({
    int, float, bool, complex, str, bytes, type(None), type(Ellipsis), type, types.FunctionType,
    torch.dtype, torch.device, torch.memory_format, devices.Device,
})


def _collect(items: Any, found: list[Proxy]) -> bool:
    """Append the proxies in ``items`` (a tuple/list/dict's values) to ``found``; False on a container it cannot open."""
    for item in items:
        kind = type(item)
        if kind in _LEAVES:
            continue
        if isinstance(item, Proxy):
            found.append(item)
        elif isinstance(item, tuple | list):
            if not _collect(item, found):
                return False
        elif isinstance(item, dict):
            if item and not _collect(_values_in_key_order(item), found):
                return False
        elif kind is slice:
            if not _collect((item.start, item.stop, item.step), found):
                return False
        elif not isinstance(item, dtypes.dtype):
            return False
    return True


def _values_in_key_order(mapping: dict[Any, Any]) -> list[Any]:
    """The values in the order Thunder's pytree (optree) flattens a dict: by sorted key when the keys sort."""
    try:
        return [mapping[key] for key in sorted(mapping)]
    except TypeError:
        return list(mapping.values())


def proxy_args(bsym: Any) -> tuple[Proxy, ...]:
    """The proxies among ``bsym``'s arguments (``bsym.flat_proxy_args``, without caching it)."""
    cached = bsym.__dict__.get("flat_proxy_args")
    if cached is not None:
        return cached  # type: ignore[no-any-return]
    found: list[Proxy] = []
    kwargs = bsym.kwargs
    if _collect(bsym.args, found) and (not kwargs or _collect(_values_in_key_order(kwargs), found)):
        return tuple(found)
    return bsym.flat_proxy_args  # type: ignore[no-any-return]


def proxy_outs(bsym: Any) -> tuple[Proxy, ...]:
    """The proxies among ``bsym``'s outputs (``bsym.flat_proxy_outs``, without caching it)."""
    cached = bsym.__dict__.get("flat_proxy_outs")
    if cached is not None:
        return cached  # type: ignore[no-any-return]
    found: list[Proxy] = []
    if _collect((bsym.output,), found):
        return tuple(found)
    return bsym.flat_proxy_outs  # type: ignore[no-any-return]
