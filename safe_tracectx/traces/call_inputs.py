"""Which inputs of a ``thunder.jit`` call share storage, by the names the prologue unpacks them into.

Thunder's prologue unpacks the call's arguments by name (``unpack_trivial`` of
``args`` and ``kwargs``, then ``unpack_getitem``/``unpack_sequence`` into them);
the computation trace takes those names as its arguments. The call is kept as
its storages (:func:`call_storages`: the same tuples, lists and dicts, each plain
strided tensor replaced by its storage as Thunder compares it for its alias
groups, ``untyped_storage().data_ptr()``, anything else by None), so nothing of
the user's is kept alive, and no user ``__getitem__`` runs::

    >>> import torch
    >>> from thunder.core.trace import TraceCtx
    >>> from safe_tracectx.traces.call_inputs import call_storages, storage_keys
    >>> x = torch.ones(4)
    >>> args, kwargs = call_storages((x, x.view(2, 2), 3), {})
    >>> args[0] == args[1] and args[2] is None
    True
    >>> storage_keys([TraceCtx()], (args, kwargs))
    {}
"""

from __future__ import annotations

from safe_tracectx._support.extras import require_thunder

require_thunder("safe_tracectx.traces.call_inputs")

from collections.abc import Iterable, Mapping
from typing import Any, Final

import torch
from thunder.core.prims import PrimIDs
from thunder.core.proxies import Proxy

__all__ = ["call_storages", "storage_keys", "unpacked"]

_TRIVIAL: Final = PrimIDs.UNPACK_TRIVIAL
_GETITEM: Final = PrimIDs.UNPACK_GETITEM
_SEQUENCE: Final = PrimIDs.UNPACK_SEQUENCE
_MISSING: Final = object()


def _stored(value: Any) -> Any:
    if type(value) is torch.Tensor:  # as thunder.jit's _alias_tensor_of_args_kwargs_dict: subclasses have no data pointer
        return int(value.untyped_storage().data_ptr()) if value.layout is torch.strided else None
    if isinstance(value, tuple | list):
        return type(value)(map(_stored, value)) if type(value) in (tuple, list) else tuple(map(_stored, value))
    if isinstance(value, dict):
        return {key: _stored(item) for key, item in value.items()}
    return None


def call_storages(args: tuple[Any, ...], kwargs: Mapping[str, Any]) -> tuple[tuple[Any, ...], dict[str, Any]]:
    """``args`` and ``kwargs`` with each plain strided tensor replaced by its storage (an int), any other leaf by None."""
    return tuple(map(_stored, args)), {key: _stored(value) for key, value in kwargs.items()}


def _item(container: Any, key: Any) -> Any:
    if isinstance(container, tuple | list | dict):
        try:
            return container[key]
        except (IndexError, KeyError, TypeError):
            return _MISSING
    return _MISSING


def unpacked(prologue: Any, args: tuple[Any, ...], kwargs: Mapping[str, Any]) -> dict[str, Any]:
    """Each name ``prologue`` unpacks from ``args`` and ``kwargs`` (tuples, lists and dicts), with its value there."""
    values: dict[str, Any] = {}
    for bsym in prologue.bound_symbols:
        sid = getattr(bsym.sym, "id", None)
        output = bsym.output
        if sid == _TRIVIAL and isinstance(output, Proxy):
            root = (bsym.kwargs or {}).get("name", output.name)
            if root == "args":
                values[output.name] = args
            elif root == "kwargs":
                values[output.name] = kwargs
        elif sid == _GETITEM and isinstance(output, Proxy) and len(bsym.args) == 2:
            container, key = bsym.args
            source = values.get(container.name, _MISSING) if isinstance(container, Proxy) else _MISSING
            value = _item(source, key)
            if value is not _MISSING:
                values[output.name] = value
        elif sid == _SEQUENCE and bsym.args and isinstance(bsym.args[0], Proxy):
            source = values.get(bsym.args[0].name, _MISSING)
            if isinstance(source, tuple | list) and isinstance(output, tuple | list) and len(output) == len(source):
                values.update((p.name, v) for p, v in zip(output, source) if isinstance(p, Proxy))
    return values


def storage_keys(prologues: Iterable[Any], call: tuple[tuple[Any, ...], Mapping[str, Any]]) -> dict[str, int]:
    """The storage of each tensor input name ``prologues`` unpack from ``call`` (as :func:`call_storages` gives it;
    a name two prologues unpack as different values is left out)."""
    keys: dict[str, int] = {}
    unsure: set[str] = set()
    for prologue in prologues:
        for name, key in unpacked(prologue, *call).items():
            if not isinstance(key, int) or keys.get(name, key) != key:
                unsure.add(name)
            else:
                keys[name] = key
    return {name: key for name, key in keys.items() if name not in unsure}
