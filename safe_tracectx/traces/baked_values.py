"""The ``torch.dtype`` and ``torch.device`` values a call hands a jitted function, and which a program bakes in.

Thunder's interpretation records a dtype or device the program passes to a torch function as a
literal of the computation trace (``ltorch.to(x, torch.float64, ...)``); whether its prologue checks
the argument it came from is another matter. The call's dtypes and devices are found by their
path in its ``args`` and ``kwargs`` (:func:`typed_leaves`: through the same tuples, lists and dicts
as ``call_inputs``, by the containers' own base methods, so no user ``__getitem__`` runs and nothing
of the user's is kept: each value is kept as its :func:`key`), and read again at a later call
(:func:`value_at`)::

    >>> import torch
    >>> from safe_tracectx.traces.baked_values import key, typed_leaves, value_at
    >>> found = typed_leaves((torch.ones(2), torch.float64), {"opts": {"dt": torch.float16, "n": 3}})
    >>> [(path, k) for path, (_, k) in found.items()]
    [('args[1]', ('dtype', 'torch.float64')), ("kwargs['opts']['dt']", ('dtype', 'torch.float16'))]
    >>> steps = found["kwargs['opts']['dt']"][0]
    >>> key(value_at((), {"opts": {"dt": torch.bfloat16}}, steps))
    ('dtype', 'torch.bfloat16')
"""

from __future__ import annotations

from safe_tracectx._support.extras import require_thunder

require_thunder("safe_tracectx.traces.baked_values")

from collections.abc import Iterator, Mapping
from typing import Any, Final

import torch
from thunder.core import devices, dtypes

__all__ = ["MISSING", "Key", "key", "literals", "shown", "typed_leaves", "value_at"]

#: What a value is kept as: ("dtype", "torch.float64") or ("device", "cpu").
Key = tuple[str, str]
#: A path's value at a call where the path leads nowhere (another structure).
MISSING: Final = object()
#: How deep a call's containers are followed.
_DEPTH: Final = 32


def key(value: Any) -> Key | None:
    """What a ``torch.dtype``/``torch.device`` (or Thunder's dtype/device) is kept and compared as; None for
    anything else."""
    try:
        if isinstance(value, torch.dtype):
            return "dtype", str(value)
        if isinstance(value, dtypes.dtype):
            return "dtype", str(dtypes.to_torch_dtype(value))
        if isinstance(value, torch.device | devices.Device):
            return "device", str(devices.to_torch_device(devices.to_device(value)))
    except Exception:  # noqa: BLE001 - a value Thunder cannot translate is no literal of the program
        return None
    return None


def shown(found: Key) -> str:
    """``torch.float64``, ``torch.device("cpu")``: a kept value as the user would write it."""
    kind, text = found
    return text if kind == "dtype" else f'torch.device("{text}")'


def _items(value: Any) -> Iterator[tuple[int | str, Any]] | None:
    """A container's (key, item) pairs by its base class's own methods (a subclass's overrides never run); None
    for a leaf. A dict key that is not a str or int is not followed (it would be kept)."""
    if isinstance(value, dict):
        return ((k, v) for k, v in dict.items(value) if type(k) in (str, int))
    if isinstance(value, tuple):
        return enumerate(tuple.__iter__(value))
    if isinstance(value, list):
        return enumerate(list.__iter__(value))
    return None


def typed_leaves(args: tuple[Any, ...], kwargs: Mapping[str, Any]) -> dict[str, tuple[tuple[Any, ...], Key]]:
    """Each ``torch.dtype`` and ``torch.device`` in the call, by its path (``args[1]``, ``kwargs['opts']['dt']``):
    (the steps to it, its key). Never raises."""
    found: dict[str, tuple[tuple[Any, ...], Key]] = {}

    def walk(value: Any, steps: tuple[Any, ...], path: str, seen: frozenset[int]) -> None:
        if isinstance(value, torch.dtype | torch.device):
            k = key(value)
            if k is not None:
                found[path] = (steps, k)
            return
        items = _items(value)
        if items is None or id(value) in seen or len(steps) > _DEPTH:
            return
        inner = seen | {id(value)}
        for name, item in items:
            walk(item, (*steps, name), f"{path}[{name!r}]", inner)

    try:
        walk(tuple(args), ("args",), "args", frozenset())
        walk(dict(kwargs), ("kwargs",), "kwargs", frozenset())
    except Exception:  # noqa: BLE001 - a call this walk cannot read: nothing of it is judged
        return {}
    return found


def value_at(args: Any, kwargs: Any, steps: tuple[Any, ...]) -> Any:
    """The value at ``steps`` in a call's ``args`` and ``kwargs`` (read as :func:`typed_leaves` reads them), or
    :data:`MISSING`."""
    value = args if steps[0] == "args" else kwargs
    for step in steps[1:]:
        if isinstance(value, dict) and type(step) in (str, int):
            value = dict.get(value, step, MISSING)
        elif isinstance(value, tuple | list) and type(step) is int:
            size = tuple.__len__(value) if isinstance(value, tuple) else list.__len__(value)
            if not 0 <= step < size:
                return MISSING
            value = tuple.__getitem__(value, step) if isinstance(value, tuple) else list.__getitem__(value, step)
        else:
            return MISSING
        if value is MISSING:
            return MISSING
    return value


def literals(trace: Any) -> set[Key]:
    """The dtypes and devices the top-level bound symbols of ``trace`` are given as literals (in their arguments
    and keyword arguments, at any depth of nesting): what a user's call of a torch function baked in."""
    found: set[Key] = set()

    def walk(value: Any, depth: int) -> None:
        k = key(value)
        if k is not None:
            found.add(k)
        elif depth < _DEPTH and isinstance(value, tuple | list):
            for item in value:
                walk(item, depth + 1)
        elif depth < _DEPTH and isinstance(value, dict):
            for item in value.values():
                walk(item, depth + 1)

    for bsym in getattr(trace, "bound_symbols", None) or ():
        walk(getattr(bsym, "args", None) or (), 0)
        walk(getattr(bsym, "kwargs", None) or {}, 0)
    return found
