"""The proxies a bound symbol reads and writes, found without filling Thunder's caches.

``BoundSymbol.flat_proxy_args``/``flat_proxy_outs`` are cached properties: the
first read flattens the symbol's arguments with Thunder's pytree (a
``tree_map`` and a ``tree_flatten``) and stores the flat list, its tree spec
and the tuple in the symbol. Checking every pass's output that way flattened
~9,000 symbols per nanoGPT compile that Thunder itself never flattens: ~130
ms, and thousands of lasting objects for the garbage collector to scan. Here a
cache Thunder already filled is read, and otherwise the tree is walked as
Thunder's pytree (optree, namespace ``thunder``) walks it, nothing stored: plain
tuples, lists and dicts directly, any other type as optree opens it (an
``OrderedDict`` in insertion order, a tuple subclass as one leaf). A dataclass
(Thunder registers its class on the fly), a root Thunder's ``tree_flatten``
refuses, and a walk that fails fall back to Thunder's flattening (its property's
own function, its result not stored)::

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

from safe_tracectx._support.extras import require_thunder

require_thunder("safe_tracectx.traces.bound_proxies")

import dataclasses
import functools
import types
from typing import Any, Final

import optree
import torch
from thunder.core import devices, dtypes
from thunder.core.proxies import Proxy
from thunder.core.pytree import OPTREE_NAMESPACE
from torch.fx.immutable_collections import immutable_list

try:  # since Thunder #1446 (2024-11-18) its tree_flatten takes a namedtuple root; before, it refused one
    from thunder.core.baseutils import is_likely_from_collections_namedtuple
except ImportError:  # pragma: no cover - a Thunder older than #1446

    def is_likely_from_collections_namedtuple(x: Any) -> bool:  # type: ignore[misc]
        return False

__all__ = ["plain_shape", "proxy_args", "proxy_outs"]

#: Types Thunder's pytree keeps as leaves that cannot hold a proxy.
_LEAVES: Final[frozenset[type]] = frozenset({
    int, float, bool, complex, str, bytes, type(None), type(Ellipsis), type, types.FunctionType,
    torch.dtype, torch.device, torch.memory_format, devices.Device,
})

#: Containers whose children, in Thunder's order, are their items (Thunder registers Size and immutable_list so).
_SEQUENCES: Final[frozenset[type]] = frozenset({tuple, list, torch.Size, immutable_list})

#: Roots Thunder's ``tree_flatten`` accepts (it raises TypeError on a root of a type not in its own list).
_ROOTS: Final[frozenset[type]] = (_LEAVES - {bytes}) | _SEQUENCES | {dict, slice}


def _collect(items: Any, found: list[Proxy]) -> bool:
    """Append the proxies in ``items`` (a container's children) to ``found``; False where Thunder must look."""
    for item in items:
        kind = type(item)
        if kind in _LEAVES:
            continue
        if isinstance(item, Proxy):
            found.append(item)
        elif kind in _SEQUENCES:
            if not _collect(item, found):
                return False
        elif kind is dict:
            if item and not _collect(_dict_values(item), found):
                return False
        elif kind is slice:
            if not _collect((item.start, item.stop, item.step), found):
                return False
        elif isinstance(item, dtypes.dtype):
            continue
        elif dataclasses.is_dataclass(item) and not isinstance(item, type):
            return False
        elif not optree.tree_is_leaf(item, none_is_leaf=True, namespace=OPTREE_NAMESPACE):
            children = optree.tree_flatten_one_level(item, none_is_leaf=True, namespace=OPTREE_NAMESPACE)[0]
            if not _collect(children, found):
                return False
    return True


def _dict_values(mapping: Any) -> list[Any]:
    """The values in the order optree flattens a dict: by sorted key, else as optree orders keys that do not sort."""
    try:
        return [mapping[key] for key in sorted(mapping)]
    except TypeError:  # mixed key types: optree sorts by type name first, or keeps insertion order
        return list(optree.tree_flatten_one_level(mapping, none_is_leaf=True, namespace=OPTREE_NAMESPACE)[0])


def _walk(trees: Any) -> tuple[Proxy, ...] | None:
    """The proxies in the trees ``trees`` holds, in Thunder's order; None where Thunder's property must decide."""
    found: list[Proxy] = []
    try:
        return tuple(found) if _collect(trees, found) else None
    except Exception:  # noqa: BLE001 - too deep for this stack, a failing flatten: Thunder's property decides
        return None


def proxy_args(bsym: Any) -> tuple[Proxy, ...]:
    """The proxies among ``bsym``'s arguments (``bsym.flat_proxy_args``, without caching it)."""
    cached = bsym.__dict__.get("flat_proxy_args")
    if cached is not None:
        return cached  # type: ignore[no-any-return]
    args, kwargs = bsym.args, bsym.kwargs
    # Thunder flattens (args, kwargs): the args' items, then the kwargs (an empty dict holds nothing)
    found = _walk(args) if type(args) is tuple and type(kwargs) is dict and not kwargs else _walk((args, kwargs))
    return _thunder_flattened(bsym, "args") if found is None else found


def proxy_outs(bsym: Any) -> tuple[Proxy, ...]:
    """The proxies among ``bsym``'s outputs (``bsym.flat_proxy_outs``, without caching it)."""
    cached = bsym.__dict__.get("flat_proxy_outs")
    if cached is not None:
        return cached  # type: ignore[no-any-return]
    output = bsym.output
    if isinstance(output, Proxy):
        return (output,)
    found = _walk((output,)) if type(output) in _ROOTS or _thunder_flattens(output) else None
    return _thunder_flattened(bsym, "outs") if found is None else found


def _thunder_flattened(bsym: Any, side: str) -> tuple[Proxy, ...]:
    """The proxies of ``bsym``'s ``flat_{side}``, flattened by Thunder's own code (its cached property's
    function), nothing stored in ``bsym``; a look-alike without Thunder's property is asked for its own."""
    flat = bsym.__dict__.get(f"flat_{side}")
    if flat is None:
        with_spec = bsym.__dict__.get(f"flat_{side}_and_spec")
        if with_spec is None:
            prop = getattr(type(bsym), f"flat_{side}_and_spec", None)
            if not isinstance(prop, functools.cached_property):
                return tuple(getattr(bsym, f"flat_proxy_{side}"))
            with_spec = prop.func(bsym)
        flat = with_spec[0]
    return tuple(x for x in flat if isinstance(x, Proxy))


def _thunder_flattens(root: Any) -> bool:
    """Whether Thunder's ``tree_flatten`` takes ``root``, not a proxy nor of a type in ``_ROOTS`` (those it takes)."""
    if type(root).__module__.startswith("torch.return_types"):
        return True
    return bool(is_likely_from_collections_namedtuple(root))  # type: ignore[no-untyped-call]


def plain_shape(proxy: object) -> tuple[int, ...] | None:
    """A tensor proxy's shape when every dimension is a plain int (None: symbolic dimensions, or no shape)::

        >>> plain_shape(object()) is None
        True
    """
    shape = getattr(proxy, "_shape", None)
    if isinstance(shape, tuple | list) and all(type(s) is int for s in shape):
        return tuple(shape)
    return None
