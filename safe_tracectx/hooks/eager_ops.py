"""Eager PyTorch's own ops, for the symbols the torch executor runs only by their decomposition.

The replays' reference is the program made executable with the torch executor. Where
that executor has no implementation of a symbol (``ltorch.sigmoid``), it runs the
symbol's decomposition (``neg``, ``exp``, ``add``, ``reciprocal``), and autograd of
that decomposition shares its flaws: NaN at ``sigmoid(-1000)``, where eager PyTorch's
gradient is 0. This executor runs each such symbol as the torch function its id
names (``torch.sigmoid``), called with the symbol's arguments; a symbol whose id
names no torch function, or whose arguments torch's function does not take (tried
on meta tensors: ``torch.max(w, None, False)``), is left to the torch executor. It
is never registered with Thunder::

    >>> from safe_tracectx.hooks.eager_ops import torch_function
    >>> torch_function("torch.sigmoid").__name__, torch_function("thunder.torch.nothing")
    ('sigmoid', None)
"""

from __future__ import annotations

import functools
import warnings
from collections.abc import Callable
from typing import Any

import torch

__all__ = ["eager_executor", "runs_as_eager", "torch_function"]


def torch_function(symbol_id: Any) -> Callable[..., Any] | None:
    """The torch callable a symbol id such as ``torch.sigmoid`` or ``torch.nn.functional.glu`` names, or None."""
    if not isinstance(symbol_id, str) or not symbol_id.startswith("torch."):
        return None
    found: Any = torch
    for part in symbol_id.split(".")[1:]:
        found = getattr(found, part, None)
        if found is None:
            return None
    return found if callable(found) else None


@functools.cache
def _executor(every: bool) -> Any:
    from thunder.extend import OperatorExecutor

    return OperatorExecutor("safe_tracectx_eager_every_op" if every else "safe_tracectx_eager_ops", version="1")


def runs_as_eager(bsym: Any) -> bool:
    """Whether eager PyTorch's own op computes ``bsym`` in the eager reference: its id names a torch function that
    takes its arguments as Thunder binds them, and it is not a prim (a prim has Thunder's own semantics: its sum of
    bools is bool, torch.sum's is int64)."""
    function = None if getattr(bsym.sym, "is_prim", False) else torch_function(getattr(bsym.sym, "id", None))
    return function is not None and _takes(function, *bsym.args, **bsym.kwargs)


def eager_executor(trace: Any, *, every: bool = False) -> Any | None:
    """An executor that runs each top-level symbol of ``trace`` the torch executor has no implementation of (or
    ``every`` one) as the torch function its id names; None when there is no such symbol (the torch executor's
    reference is eager's)."""
    from thunder.extend import get_executor

    torch_executor = get_executor("torch")
    executor = _executor(every)
    found = False
    for bsym in trace.bound_symbols:
        sid = getattr(bsym.sym, "id", None)
        if torch_executor is None or (sid in torch_executor.implmap and not every) or getattr(bsym.sym, "is_prim", False):
            continue
        function = torch_function(sid)
        if function is None:
            continue
        if sid not in executor.implmap:
            name = "eager_" + str(sid).replace(".", "_")
            operator = executor.register_operator(name, like=bsym.sym, fn=function)
            executor.register_implementation(bsym.sym, operator, checker=functools.partial(_takes, function))
        found = found or _takes(function, *bsym.args, **bsym.kwargs)
    return executor if found else None


def _takes(function: Callable[..., Any], *args: Any, **kwargs: Any) -> bool:
    """Whether ``function`` takes these arguments as Thunder binds them (tried on meta tensors of the proxies'
    shapes and dtypes: ``torch.max(w, None, False)`` does not), so that a symbol it does not take is left to the
    torch executor rather than failing the whole replay. Asked once per function and arguments' signature (a
    compile asks it twice of each symbol, and a model's layers ask it of the same shapes)::

        >>> _signature(((1, 2.0), {"dim": 1}))
        ('tuple', (('tuple', (('int', 1), ('float', 2.0))), ('dict', (('dim', ('int', 1)),))))
    """
    try:
        key = (function, _signature((args, kwargs)))
    except Exception:  # noqa: BLE001 - an argument that cannot be a key (a symbolic shape): asked every time
        return _tried(function, args, kwargs)
    known = _TAKEN.get(key)
    if known is None:
        if len(_TAKEN) >= _MOST_TAKEN:
            _TAKEN.clear()
        known = _TAKEN[key] = _tried(function, args, kwargs)
    return known


#: ``_takes``'s answers by (function, signature of the arguments), at most ``_MOST_TAKEN`` of them.
_TAKEN: dict[tuple[Any, Any], bool] = {}
_MOST_TAKEN = 4096


def _signature(value: Any) -> Any:
    """What ``_tried`` reads of ``value``, hashable: a tensor proxy's shape and dtype, a proxy's value, containers
    by their items; the type of each value kept (``1`` and ``1.0`` are different arguments to torch)."""
    from thunder.core.proxies import Proxy, TensorProxy

    if isinstance(value, TensorProxy):
        return ("tensor", tuple(int(d) for d in value.shape), str(value.dtype))
    if isinstance(value, tuple | list):
        return (type(value).__name__, tuple(_signature(v) for v in value))
    if isinstance(value, dict):
        return ("dict", tuple((k, _signature(v)) for k, v in value.items()))
    if isinstance(value, Proxy):
        value = getattr(value, "value", value)
    if isinstance(value, slice):
        return ("slice", _signature((value.start, value.stop, value.step)))
    if isinstance(value, torch.Tensor):  # hashable by identity: a key would keep it alive, and never match again
        raise TypeError("a tensor is not keyed")
    hash(value)  # (TypeError for a value that cannot be a key)
    return (type(value).__name__, value)


def _tried(function: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any]) -> bool:
    from thunder.core.dtypes import to_torch_dtype
    from thunder.core.proxies import Proxy, TensorProxy

    def meta(value: Any) -> Any:
        if isinstance(value, TensorProxy):
            return torch.empty(tuple(int(d) for d in value.shape), dtype=to_torch_dtype(value.dtype), device="meta")
        if isinstance(value, tuple | list):
            return type(value)(meta(v) for v in value) if type(value) in (tuple, list) else value
        if isinstance(value, dict):
            return {k: meta(v) for k, v in value.items()}
        return getattr(value, "value", value) if isinstance(value, Proxy) else value

    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # (a call torch refuses may warn first: nll_loss's size_average)
            function(*meta(args), **meta(kwargs))
    except Exception:  # noqa: BLE001 - not these arguments, or not on meta tensors: the torch executor's form
        return False
    return True
