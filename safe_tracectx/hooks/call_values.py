"""The values the program being compiled gets at the call that compiles it: the call's own inputs, for the replays.

A compilation keeps nothing of the user's (``Compilation.call`` holds storages, not
tensors). While the call is being compiled its ``args`` and ``kwargs`` are still in
Thunder's frames, so the replays read them there (the frame whose ``args`` and
``kwargs`` have the very storages the interpretation was given), run the latest
prologue on them as Thunder is about to, and get each input of the computation by
name: the values the user's program computes with, where a replay on random values
may never go (an ``exp`` that overflows at large magnitudes, a row that random
indices never select). It is this package's own work, and nothing is kept. A call
whose containers are not plain tuples, lists and dicts is not unpacked again: the
prologue would run the user's ``__getitem__`` once more than Thunder does::

    >>> from safe_tracectx.hooks.call_values import call_values
    >>> call_values(None) is None
    True
"""

from __future__ import annotations

import sys
from types import FrameType
from collections.abc import Mapping, Sequence
from typing import Any

import torch
from thunder.core.proxies import Proxy
from thunder.core.pytree import tree_flatten

from safe_tracectx.hooks.replay import own_work
from safe_tracectx.traces.call_inputs import call_storages, unpacked
from safe_tracectx.traces.returns import return_args

__all__ = ["call_values"]


def call_values(compilation: Any) -> dict[str, Any] | None:
    """Each input of the computation ``compilation`` compiles, by name, as the latest prologue unpacks it from the
    call being compiled (the user's own values, not copies: a replay copies what it changes); None when the call
    is no longer in Thunder's frames, there is no prologue yet, or the prologue does not run outside Thunder."""
    if compilation is None or compilation.call is None:
        return None
    prologues = compilation.prologues()
    call = _call_in_frames(compilation, sys._getframe(1))
    if not prologues or call is None or not _only_builtin_containers(call) or not _reads_only_containers(prologues[-1], call):
        return None
    try:
        values: dict[str, Any] | None = own_work(_unpack, prologues[-1], call)
    except Exception:  # noqa: BLE001 - a prologue that needs more than the call (or an older Thunder's form of it)
        return None
    return values


def _call_in_frames(compilation: Any, frame: FrameType | None) -> tuple[tuple[Any, ...], dict[str, Any]] | None:
    """The ``args`` and ``kwargs`` of a Thunder frame between ``frame`` and the compilation's outermost one that are
    the call the interpretation was given (the same storages); None once that frame has returned."""
    extent = compilation.extent
    while frame is not None:
        if str(frame.f_globals.get("__name__", "")).startswith("thunder"):
            local = frame.f_locals
            args, kwargs = local.get("args"), local.get("kwargs")
            if isinstance(args, tuple) and isinstance(kwargs, dict) and call_storages(args, kwargs) == compilation.call:
                return args, kwargs
        if extent is not None and frame.f_code is extent[0] and id(frame) == extent[1]:
            return None
        frame = frame.f_back
    return None


def _only_builtin_containers(value: Any, depth: int = 0) -> bool:
    """Whether every container in ``value`` is a plain tuple, list or dict (or a namedtuple that reads its fields as
    a tuple does): the prologue's unpacking then runs none of the user's code (a dict subclass's ``__getitem__``
    would run once more than Thunder runs it)."""
    if depth > 64:
        return False
    kind = type(value)
    if kind in (tuple, list):
        return all(_only_builtin_containers(v, depth + 1) for v in value)
    if kind is dict:
        return all(_only_builtin_containers(v, depth + 1) for v in value.values())
    if isinstance(value, tuple) and isinstance(getattr(kind, "_fields", None), tuple):
        return kind.__getitem__ is tuple.__getitem__ and all(_only_builtin_containers(v, depth + 1) for v in value)
    return not isinstance(value, tuple | list | dict | Mapping | Sequence) or isinstance(value, str | bytes)


def _reads_only_containers(prologue: Any, call: tuple[tuple[Any, ...], dict[str, Any]]) -> bool:
    """Whether everything ``prologue`` unpacks from the call's ``args`` and ``kwargs`` is an item of their (plain)
    containers or a namedtuple's field: an attribute of another object (``h.d``) may run the user's code, and what
    it holds was never looked at."""
    from_call: set[str] = set()
    for bsym in prologue.bound_symbols:
        sid = getattr(bsym.sym, "id", None)
        if not str(getattr(sid, "name", "")).startswith("UNPACK"):
            continue
        outputs = {p.name for p in (bsym.output if isinstance(bsym.output, tuple | list) else (bsym.output,))
                   if isinstance(p, Proxy)}
        parent = bsym.args[0] if bsym.args and isinstance(bsym.args[0], Proxy) else None
        root = (bsym.kwargs or {}).get("name", next(iter(outputs), None)) if parent is None else None
        if root in ("args", "kwargs") or (parent is not None and parent.name in from_call):
            from_call |= outputs
    return from_call <= set(unpacked(prologue, *call))


def _unpack(prologue: Any, call: tuple[tuple[Any, ...], dict[str, Any]]) -> dict[str, Any] | None:
    """What ``prologue`` returns for ``call``, by the names its return statement gives the values."""
    returned = return_args(prologue)
    if returned is None:
        return None
    with torch.no_grad():
        result = prologue.python_callable(include_decorators=False)(*call[0], **call[1])
    names = tree_flatten(returned)[0]  # type: ignore[no-untyped-call]
    values = tree_flatten((result,))[0]  # type: ignore[no-untyped-call]
    if len(names) != len(values):
        return None
    return {p.name: v for p, v in zip(names, values) if isinstance(p, Proxy)}
