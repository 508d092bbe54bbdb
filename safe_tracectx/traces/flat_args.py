"""The inputs a computation trace hands to autograd: its return's ``flat_args``, one per argument, by position.

Thunder wraps a computation trace's return as ``{"output": ..., "flat_args": [...]}``
(``wrap_return_value_together_with_arguments``: its flattened ``args`` and
``kwargs``), and the autograd connection gives the backward's gradients, and
copies of in-place updates, to ``flat_args`` by position. A pass that changes a
trace's arguments must change ``flat_args`` with them (the quantization, QLoRA and
TE-inference transforms do); one that does not (#2093's LoRA pass) drops
gradients or hands them to the wrong input. An entry may be the argument itself
or the value an in-place update made of it (``insert_alias_updates`` returns the
updated tensor in its place)::

    >>> from thunder.core.trace import TraceCtx
    >>> from safe_tracectx.traces.flat_args import flat_args_mismatches
    >>> flat_args_mismatches(TraceCtx())
    []
"""

from __future__ import annotations

from safe_tracectx._support.extras import require_thunder

require_thunder("safe_tracectx.traces.flat_args")

from collections.abc import Mapping
from typing import Any, Final, NamedTuple

from thunder.core.proxies import Proxy
from thunder.core.pytree import tree_flatten

from safe_tracectx.traces.bound_proxies import proxy_args, proxy_outs
from safe_tracectx.traces.call_inputs import Region
from safe_tracectx.traces.returns import return_args

__all__ = ["FlatArgsMismatch", "flat_args_mismatches", "return_flat_args"]

_ALIAS_FIX: Final = (
    "replace an input only by one that is the same elements in the call (itself, or a reshape of it): Thunder's "
    "alias groups (cache_info['alias_tensor_indices']) are positions in the call's flattened (args, kwargs), not in "
    "the computation trace's arguments, which leave out the inputs it does not use, and inputs that share a storage "
    "may be other elements of it (halves, a transpose)"
)


class FlatArgsMismatch(NamedTuple):
    """Arguments of the trace that ``flat_args`` does not hand to autograd at their position, and why."""

    names: tuple[str, ...]
    message: str
    #: The fix, when it is not the kind's (an input replaced by one that does not share its storage).
    advice: str | None = None


def return_flat_args(trace: Any) -> list[Any] | None:
    """The ``flat_args`` of ``trace``'s return (a computation trace's, or a forward's), if it has them."""
    args = return_args(trace)
    if not args:
        return None
    first = args[0]
    if isinstance(first, tuple | list) and first and isinstance(first[0], dict):
        first = first[0]  # a forward's (its return value, what it saves for the backward)
    flat = first.get("flat_args") if isinstance(first, dict) else None
    return list(flat) if isinstance(flat, tuple | list) else None


def _name(value: Any) -> str:
    return value.name if isinstance(value, Proxy) else repr(value)


def flat_args_mismatches(trace: Any, storages: Mapping[str, Region | None] | None = None) -> list[FlatArgsMismatch]:
    """Where ``trace``'s return hands autograd other inputs than its arguments (by position); reads only.

    An entry that is another argument (or computed from one) in an argument's place is how Thunder's alias pass
    replaces inputs that share storage by one of them; with ``storages`` (where each input's elements are in the
    call, None for one Thunder's alias groups never hold: :func:`safe_tracectx.traces.call_inputs.storage_keys`) it
    must be the argument's very elements (the argument itself, or a reshape of it); an input missing from
    ``storages`` is taken on trust.
    """
    given = return_flat_args(trace)
    if given is None:
        return []
    try:
        arguments, _ = tree_flatten((trace.args, trace.kwargs))  # type: ignore[no-untyped-call]
    except Exception:  # noqa: BLE001 - arguments Thunder's own pytree cannot flatten: Thunder fails there first
        return []
    found: list[FlatArgsMismatch] = []
    if len(given) != len(arguments):
        missing = tuple(_name(a) for a in arguments[len(given):] if isinstance(a, Proxy))
        extra = [_name(g) for g in given[len(arguments):]]
        listed = ", ".join(map(_name, given))
        what = (f"{', '.join(missing)} {'has' if len(missing) == 1 else 'have'} no entry, so autograd never gives "
                f"{'it' if len(missing) == 1 else 'them'} a gradient" if missing else
                f"{', '.join(extra)} stand{'s' if len(extra) == 1 else ''} for no argument")
        found.append(FlatArgsMismatch(
            missing or tuple(extra) or ("flat_args",),
            f"the return hands autograd {len(given)} flat_args ({listed}) for the trace's {len(arguments)} arguments: "
            f"{what}, and the backward's gradients, given by position, go to other inputs than they are for",
        ))
    names = {a.name for a in arguments if isinstance(a, Proxy)}
    producers: dict[str, Any] | None = None
    for position, (entry, argument) in enumerate(zip(given, arguments)):
        if not isinstance(argument, Proxy) or (isinstance(entry, Proxy) and entry.name == argument.name):
            continue
        if producers is None:
            producers = {p.name: b for b in trace.bound_symbols for p in proxy_outs(b)}
        sources = _sources(entry.name, names, producers) if isinstance(entry, Proxy) else set()
        if argument.name in sources:
            continue  # the value an in-place update made of the argument (insert_alias_updates)
        if sources:  # another input in its place: the alias pass's, if they share storage
            if storages is None or argument.name not in storages or any(s not in storages for s in sources):
                continue
            key = storages[argument.name]
            regions = [r for r in (storages[s] for s in sorted(sources)) if r is not None]
            if key is not None and any(key.same_elements(r) for r in regions):
                continue
            other = ", ".join(sorted(sources))
            if key is None:
                why = (f"{argument.name} is no plain tensor of the call's arguments (a module's parameter or "
                       "attribute, a tensor subclass), which Thunder's alias groups never hold")
            elif any(r.storage == key.storage for r in regions):
                why = (f"though they share a storage in this call they are not the same elements ({argument.name} "
                       f"at {key.describe()}; " + "; ".join(r.describe() for r in regions) + ") in the same order, "
                       "read alike")
            else:
                why = "they do not share storage in this call"
            found.append(FlatArgsMismatch(
                (argument.name, *sorted(sources)),
                f"the return's flat_args[{position}] is {_name(entry)} where the trace's argument {argument.name} is: "
                f"a pass replaced {argument.name} by {other}, but {why}, so the program computes with {other} where "
                f"the call gives {argument.name} (and autograd gives {argument.name}'s gradient, and copies its "
                f"in-place updates, to {_name(entry)})",
                _ALIAS_FIX,
            ))
            continue
        found.append(FlatArgsMismatch(
            (argument.name,),
            f"the return's flat_args[{position}] is {_name(entry)} where the trace's argument {argument.name} is, "
            f"and {_name(entry)} is computed from no argument: autograd would give {argument.name}'s gradient "
            f"(and copy its in-place updates) to {_name(entry)}",
        ))
    return found


def _sources(name: str, arguments: set[str], producers: dict[str, Any]) -> set[str]:
    """The arguments ``name`` is, or is computed from through the trace's symbols."""
    seen: set[str] = set()
    found: set[str] = set()
    pending = [name]
    while pending:
        current = pending.pop()
        if current in seen:
            continue
        seen.add(current)
        if current in arguments:
            found.add(current)
        elif current in producers:
            pending.extend(p.name for p in proxy_args(producers[current]))
    return found
