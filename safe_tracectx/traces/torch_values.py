"""Thunder's own dtypes and devices where a program about to run hands values to Python.

Inside a trace a tensor's dtype and device are ``thunder.dtypes.dtype`` and
``thunder.devices.Device``; the operators Thunder's executors run translate them.
The symbols Python runs itself do not: the return, and the writes of an
attribute, an item or a buffer of a user object (``prims.pack_attr`` and its
kind, which the epilogue holds). In a program about to run they must already
be torch's (``thunder.common.transform_to_torch_types`` translates them), or the
user gets Thunder's type where torch's is expected (#2669: a module attribute set
to ``x.device`` became a ``thunder.devices.Device``)::

    >>> import torch, thunder
    >>> from safe_tracectx.traces.torch_values import untranslated_values
    >>> jitted = thunder.jit(lambda x: (x * 2, x.dtype, x.device))
    >>> _ = jitted(torch.ones(2))
    >>> untranslated_values(thunder.last_traces(jitted)[-1])
    []
"""

from __future__ import annotations

from safe_tracectx._support.extras import require_thunder

require_thunder("safe_tracectx.traces.torch_values")

from typing import Any, Final

from thunder.core.devices import Device
from thunder.core.dtypes import dtype
from thunder.core.prims import PrimIDs
from thunder.core.proxies import Proxy

from safe_tracectx._support.labels import describe_trace
from safe_tracectx.traces.returns import is_return
from safe_tracectx.traces.violations import Violation, bsym_label

__all__ = ["PYTHON_RUN", "TRANSLATION", "untranslated_values"]

#: The symbols whose arguments Python itself hands on: to the caller, or into a user object.
PYTHON_RUN: Final = frozenset(
    getattr(PrimIDs, name) for name in ("RETURN", "PACK_ATTR", "PACK_SETITEM", "PACK_BUFFER") if hasattr(PrimIDs, name)
)
#: The step that translates Thunder's dtypes and devices to torch's before a trace runs: what such a value missed.
TRANSLATION: Final = ("Thunder-to-torch type translation", "thunder.common.transform_to_torch_types")
#: How deep a symbol's arguments are followed (Python's recursion limit stays far away).
_MAX_DEPTH: Final = 64


def _thunder_values(value: Any, depth: int = 0) -> list[Any]:
    """The Thunder dtypes and devices in ``value`` and its tuples, lists, sets and dicts (keys too: Thunder's
    tree_map translates no key); not inside proxies."""
    if isinstance(value, dtype | Device):
        return [value]
    if depth >= _MAX_DEPTH or isinstance(value, Proxy):
        return []
    if isinstance(value, tuple | list | set | frozenset):
        items: Any = value
    elif isinstance(value, dict):
        items = (*value.keys(), *value.values())
    else:
        return []
    return [found for item in items for found in _thunder_values(item, depth + 1)]


def _target(bsym: Any) -> str:
    """The name a write goes into (its first argument, a proxy of the user object), or ``return``."""
    if is_return(bsym):
        return "return"
    first = bsym.args[0] if bsym.args else None
    return first.name if isinstance(first, Proxy) else "return"


def untranslated_values(trace: Any) -> list[Violation]:
    """Each symbol Python runs itself in ``trace`` (about to run) that is given Thunder's dtype or device; reads only."""
    found: list[Violation] = []
    where = describe_trace(trace)
    for index, bsym in enumerate(getattr(trace, "bound_symbols", ())):
        if getattr(getattr(bsym, "sym", None), "id", None) not in PYTHON_RUN:
            continue
        values = [*_thunder_values(tuple(bsym.args)), *_thunder_values(dict(bsym.kwargs))]
        if not values:
            continue
        target = _target(bsym)
        into = "to the caller" if target == "return" else f"into {target}"
        shown = ", ".join(dict.fromkeys(repr(v) for v in values))
        found.append(Violation(
            "untranslated-value", target,
            f"{bsym_label(index, bsym)}, which Python runs itself, hands {shown} {into}: Thunder's own type, where "
            "the program must hand torch's (a torch.dtype, a torch.device), so the user gets another object than "
            "eager PyTorch gives",
            where, culprit=TRANSLATION,
        ))
    return found
