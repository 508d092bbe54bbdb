"""The hand-over between a forward trace and its backward, both ways; reads only.

The forward returns its output with its flat inputs, and the values it saves
for the backward; the backward unpacks what was saved and returns one gradient
per flat input::

    >>> import torch, thunder
    >>> from safe_tracectx.traces.handover import check_handover
    >>> jitted = thunder.jit(lambda x: (x.sin() * 2).sum())
    >>> jitted(torch.ones(2, requires_grad=True)).backward()
    >>> check_handover(thunder.last_traces(jitted)[-1], thunder.last_backward_traces(jitted)[-1])
    []
"""

from __future__ import annotations

from safe_tracectx._support.extras import require_thunder

require_thunder("safe_tracectx.traces.handover")

import dataclasses
from typing import Any

from thunder.core.proxies import Proxy
from thunder.core.trace import TraceCtx

from safe_tracectx._support.arguments import expect_trace
from safe_tracectx._support.labels import describe_trace
from safe_tracectx.traces.program import Program
from safe_tracectx.traces.saved_updates import updated_after_saving
from safe_tracectx.traces.violations import Violation

__all__ = ["EmptiedPart", "check_forward_backward", "check_handover", "emptied_by_backward", "saved_part"]


def check_handover(fw: TraceCtx, bw: TraceCtx, *, unread: bool = False) -> list[Violation]:
    """The hand-over between a forward and its backward, both ways: what the forward saves against what the
    backward unpacks, and the gradients the backward returns against the forward's inputs.

    The forward returns ``(output, (saved tensors, saved other values))``; the
    backward unpacks its ``saved_for_backward`` parameter into two collections,
    then each into names. Both sides must agree in count, and position by
    position in name, shape and dtype. A part the backward never unpacks is
    fine (it needs none of it); with ``unread`` it is said too, to explain a
    pass that fails on such a pair.
    """
    expect_trace(fw, "check_handover() fw", verb="must be")
    expect_trace(bw, "check_handover() bw", verb="must be")
    forward, backward = Program(fw), Program(bw)
    found: list[Violation] = _gradients_returned(forward, backward, fw, bw)
    saved = forward.saved_for_backward()
    unpacked = backward.unpacked_saved()
    if saved is None or unpacked is None:
        return found
    for part, (given, taken) in enumerate(zip(saved, unpacked)):
        what = ("saved tensors", "saved other values")[part] if part < 2 else f"saved part {part}"
        where = f"{what} of {describe_trace(fw)} and {describe_trace(bw)}"
        if taken is None:  # the backward does not read this part (`C0, _ = saved_for_backward`, or no unpacking)
            proxies = [p.name for p in given if isinstance(p, Proxy)]
            if unread and proxies:
                found.append(Violation(
                    "handover-mismatch", proxies[0],
                    f"the forward saves {len(given)} {what} ({', '.join(proxies[:6])}) that the backward never "
                    "unpacks", where,
                ))
            continue
        if len(given) != len(taken):
            name = (taken[len(given)] if len(taken) > len(given) else given[len(taken)]).name
            found.append(Violation(
                "handover-mismatch", name,
                f"the forward saves {len(given)} {what} and the backward unpacks {len(taken)} "
                f"(first unmatched: {name})", where,
            ))
            continue
        for position, (a, b) in enumerate(zip(given, taken)):
            if not (isinstance(a, Proxy) and isinstance(b, Proxy)):
                continue  # a constant saved, or a position the backward leaves unnamed (`_`)
            differences = [
                f"{attribute} {x} in the forward, {y} in the backward"
                for attribute, x, y in (
                    ("named", a.name, b.name),
                    ("shape", _meta(a, "_shape"), _meta(b, "_shape")),
                    ("dtype", _meta(a, "_dtype"), _meta(b, "_dtype")),
                )
                if x != y
            ]
            if differences:
                found.append(Violation(
                    "handover-mismatch", b.name,
                    f"position {position} of the {what} is " + "; ".join(differences), where,
                ))
    return found


def _gradients_returned(forward: Program, backward: Program, fw: TraceCtx, bw: TraceCtx) -> list[Violation]:
    """The backward returns one gradient (or None) per flat input of the forward, and no more."""
    inputs, gradients = forward.flat_inputs(), backward.gradients()
    if inputs is None or gradients is None or len(inputs) == len(gradients):
        return []
    # Which value is the odd one out is not knowable (an extra value first or last): both sides are named in full.
    returned = [g.name if isinstance(g, Proxy) else repr(g) for g in gradients]
    given = [i.name if isinstance(i, Proxy) else repr(i) for i in inputs]
    return [Violation(
        "handover-mismatch", returned[0] if returned else given[0],
        f"the backward returns {len(gradients)} values ({_listed(returned)}) but the forward has {len(inputs)} "
        f"inputs to give a gradient to ({_listed(given)}): the gradients would be assigned to the wrong inputs, "
        "or fail to be",
        f"return of {describe_trace(bw)} and inputs of {describe_trace(fw)}",
        also=tuple(returned[1:] if returned else given[1:]),
    )]


def _listed(names: list[str], most: int = 8) -> str:
    return ", ".join(names[:most]) + (f", ... ({len(names) - most} more)" if len(names) > most else "")


def _meta(proxy: Any, attribute: str) -> Any:
    value = getattr(proxy, attribute, None)
    return tuple(value) if isinstance(value, list) else value


def check_forward_backward(fw: TraceCtx, bw: TraceCtx) -> list[Violation]:
    """What breaks between a forward and its backward: the saved-for-backward hand-over (:func:`check_handover`),
    and a saved value the forward updates in place after saving it
    (:func:`~safe_tracectx.traces.saved_updates.updated_after_saving`)."""
    expect_trace(fw, "check_forward_backward() fw", verb="must be")
    expect_trace(bw, "check_forward_backward() bw", verb="must be")
    return check_handover(fw, bw) + updated_after_saving(fw, bw)




@dataclasses.dataclass(frozen=True)
class EmptiedPart:
    """A saved-for-backward collection the backward unpacks, then empties (``clear_mutable_collection(C1)``)."""

    #: Its position in ``saved_for_backward`` (0: the saved tensors, 1: the other saved values).
    position: int
    #: The collection's name in the backward (``C1``) and the names it is unpacked into (``c``).
    collection: str
    names: tuple[str, ...]


def emptied_by_backward(bw: TraceCtx) -> list[EmptiedPart]:
    """The saved-for-backward collections ``bw`` empties once it has unpacked them.

    Emptying is how a backward frees what it was handed; it is harmless when
    each call is handed a fresh collection, and fatal for a second backward
    over the same graph (``retain_graph=True``) when the forward's own list is
    handed over again: that call unpacks an empty collection. Which of the two
    happens is a fact of the run, so the collections found here are checked
    when the backward is called (``hooks.backward_calls``)::

        >>> import torch, thunder
        >>> jitted = thunder.jit(lambda x: (x.sin() * 2).sum())
        >>> jitted(torch.ones(2, requires_grad=True)).backward()
        >>> [part.collection for part in emptied_by_backward(thunder.last_backward_traces(jitted)[-1])]
        ['C0']
    """
    expect_trace(bw, "emptied_by_backward() bw", verb="must be")
    collections = Program(bw).saved_collections()
    if not collections:
        return []
    cleared = {
        bsym.args[0].name
        for bsym in bw.bound_symbols
        if getattr(bsym.sym, "name", None) == "clear_mutable_collection" and bsym.args and isinstance(bsym.args[0], Proxy)
    }
    return [
        EmptiedPart(position, collection.name, tuple(p.name for p in unpacked if isinstance(p, Proxy)))
        for position, (collection, unpacked) in enumerate(collections)
        if isinstance(collection, Proxy) and collection.name in cleared and unpacked
    ]


def saved_part(fw: Any, position: int) -> Any:
    """The collection at ``position`` that a forward trace returns for its backward, as the trace holds it (a
    list or a tuple; None: no such collection)."""
    parts = Program(fw).saved_parts() if isinstance(fw, TraceCtx) else None
    return parts[position] if parts is not None and position < len(parts) else None
