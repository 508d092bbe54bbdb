"""What a trace hands back: its return statement, read in one place.

Thunder ends each program it generates with ``prims.python_return``; what that statement holds depends on the
trace: a computation trace's output (or Thunder's ``{"output": ..., "flat_args": ...}``), a split forward's
``(that, saved for backward)``, a backward's gradients, a prologue's unpacked inputs. Every check that reads a
return goes through here::

    >>> import torch, thunder
    >>> jitted = thunder.jit(lambda x: (x * 2, x + 1))
    >>> _ = jitted(torch.ones(2))
    >>> trace = thunder.last_traces(jitted)[0]
    >>> [p.name for p in returned(trace) or ()], is_return(trace.bound_symbols[-1])
    (['t0', 't1'], True)
    >>> [b.sym.name for b in body(trace)]
    ['unpack_trivial', 'mul', 'add']
"""

from __future__ import annotations

from safe_tracectx._support.extras import require_thunder

require_thunder("safe_tracectx.traces.returns")

from collections.abc import Callable
from typing import Any, Final, cast

from thunder.core import pytree
from thunder.core.prims import PrimIDs
from thunder.core.proxies import TensorProxy

__all__ = [
    "body", "every_returned_name", "handed_to_caller", "is_return", "return_args", "return_symbol", "return_value", "returned",
]

#: The return's id (``PrimIDs.RETURN``), and the name an executor's own return symbol may carry instead.
_RETURN_IDS: Final = (PrimIDs.RETURN, "python_return")
_flatten: Final = cast(Callable[[Any], tuple[list[Any], Any]], pytree.tree_flatten)


def is_return(bsym: Any) -> bool:
    """``bsym`` is a return statement."""
    return getattr(getattr(bsym, "sym", None), "id", None) in _RETURN_IDS


def return_symbol(trace: Any) -> Any | None:
    """The return statement that ends ``trace``; None if it does not end in one."""
    bsyms = trace.bound_symbols
    return bsyms[-1] if bsyms and is_return(bsyms[-1]) else None


def return_args(trace: Any) -> tuple[Any, ...] | None:
    """The arguments of ``trace``'s return statement (empty for a bare ``return``); None without one."""
    bsym = return_symbol(trace)
    return None if bsym is None else tuple(bsym.args)


def return_value(trace: Any) -> Any:
    """What ``trace`` returns, as Thunder's ``TraceCtx.output`` reads it (the one argument, else all of them as a
    tuple); ``()`` when it does not end in a return."""
    args = return_args(trace)
    if not args:
        return ()
    return args[0] if len(args) == 1 else args


def handed_to_caller(value: Any) -> list[Any]:
    """The flat values a computation hands its caller from what its return holds: the output itself, Thunder's
    ``{"output": ..., "flat_args": ...}``, or a split forward's ``(that, saved for backward)``."""
    if isinstance(value, tuple) and len(value) == 2 and isinstance(value[0], dict) and "output" in value[0]:
        value = value[0]
    if isinstance(value, dict) and "output" in value:
        value = value["output"]
    return _flatten((value,))[0]  # (Thunder's flattening takes no bare tensor)


def returned(trace: Any) -> list[Any] | None:
    """The flat values ``trace`` hands its caller (:func:`handed_to_caller`); None if it does not end in a
    return."""
    return None if return_symbol(trace) is None else handed_to_caller(return_value(trace))


def every_returned_name(trace: Any) -> set[str]:
    """The names of every tensor ``trace``'s return statement holds: what the caller gets, and Thunder's
    ``flat_args`` and what a forward saves for its backward beside it."""
    return {p.name for p in _flatten((return_value(trace),))[0] if isinstance(p, TensorProxy)}


def body(trace: Any) -> list[Any]:
    """``trace``'s top-level symbols but its return statements."""
    return [b for b in trace.bound_symbols if not is_return(b)]
