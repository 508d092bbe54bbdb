"""A joint forward-backward trace (the grad transform's) as Thunder's ``split_into_forward_and_backward`` reads it:
which symbols the forward keeps, the cotangents it would read, the in-place updates it would lose, and the
backward symbols a fusion pass would take for forward ones.

    >>> from thunder.core.trace import TraceCtx
    >>> from safe_tracectx.traces.joint import is_joint
    >>> is_joint(TraceCtx())
    False
"""

from __future__ import annotations

from safe_tracectx._support.extras import require_thunder

require_thunder("safe_tracectx.traces.joint")

from typing import Any, Final, NamedTuple

import thunder.core.symbol as _symbol
from thunder.core.prims import OpTags, PrimIDs
from thunder.core.proxies import Proxy
from thunder.core.pytree import tree_flatten

from safe_tracectx.traces.bound_proxies import proxy_args, proxy_outs
from safe_tracectx.traces.returns import return_args
from safe_tracectx.traces.violations import ViolationKind, bsym_label

__all__ = [
    "JointFinding", "findings", "forward_needs_cotangents", "is_joint", "stale_after_in_place", "untagged_backward",
    "updates_in_place",
]

_COPY: Final = PrimIDs.COPY_
# BoundSymbolTag.BACKWARD (Thunder >= 0.2.4) marks the backward's symbols of a joint trace
_BACKWARD_TAG: Final = getattr(getattr(_symbol, "BoundSymbolTag", None), "BACKWARD", None)
# OpTags.IN_PLACE where this Thunder has it
_IN_PLACE: Final = getattr(OpTags, "IN_PLACE", None)


class JointFinding(NamedTuple):
    """What a joint trace's split gets wrong: the check's kind, the name, the message, the symbol, a note or not."""

    kind: ViolationKind
    name: str
    message: str
    #: The index of the bound symbol it is about.
    position: int
    note: bool = False
    also: tuple[str, ...] = ()


def findings(trace: Any, *, executed: bool = False) -> list[JointFinding]:
    """What the forward/backward split of ``trace``, a joint trace, would get wrong (nothing for another trace):
    a cotangent the forward reads, an in-place update the forward depends on but leaves to the backward, and (a note,
    while the trace is on its way: ``executed`` False) a backward symbol without its tag."""
    bsyms = trace.bound_symbols
    info = _split_info(trace)
    if info is None:  # not a joint trace: nothing to split
        return []
    split = _split(trace, info)  # once, for both checks of the split
    found = [
        JointFinding("forward-reads-backward", name,
                     f"{name} is a cotangent ({bsym_label(source, bsyms[source])}) that {bsym_label(reader, bsyms[reader])} "
                     "reads, and that symbol computes something the forward needs: the forward/backward split puts it "
                     f"in the forward, where {name} is never defined", reader)
        for name, reader, source in forward_needs_cotangents(trace, split)
    ]
    for name, index in split[2]:  # stale_after_in_place
        outputs = [p.name for p in proxy_outs(bsyms[index])]
        unread = f"whose output {', '.join(outputs)} the forward never reads" if outputs else "which outputs nothing"
        found.append(JointFinding(
            "stale-after-in-place", name,
            f"{name} is updated in place by {bsym_label(index, bsyms[index])}, {unread}, and the forward reads or "
            f"returns {name} after it: the forward/backward split leaves that symbol to the backward, so the forward "
            f"computes with {name} as it was before the update (eager PyTorch gives the updated one)", index,
        ))
    if not executed:  # a defect on its way (what the next fusion pass makes of it), never a report of its own
        found += [
            JointFinding("forward-reads-backward", name,
                         f"{bsym_label(index, bsyms[index])} computes from the cotangent {name} without the BACKWARD "
                         f"tag: a fusion pass may group it with the forward, which then reads {name}, never defined "
                         "there", index, note=True)
            for name, index in untagged_backward(trace)
        ]
    return found


def is_joint(trace: Any) -> bool:
    """A joint forward-backward trace: the grad transform's, whose return holds ``fw_flat_out``."""
    args = return_args(trace)
    info = args[0] if args else None
    return isinstance(info, dict) and "fw_flat_out" in info

def _split_info(trace: Any) -> dict[str, Any] | None:
    """The return's information of a joint trace (``fw_flat_out``, or ``grad_flat_args`` before Thunder #2147)."""
    args = return_args(trace)
    info = args[0] if args else None
    return info if isinstance(info, dict) and ("fw_flat_out" in info or "grad_flat_args" in info) else None


def forward_needs_cotangents(
    trace: Any, split: tuple[list[int], dict[str, int], list[tuple[str, int]]] | None = None
) -> list[tuple[str, int, int]]:
    """In a joint trace (the grad transform's, whose return holds ``fw_flat_out``): the cotangents the forward
    would read once split, each as (name, index of the reader, index of its ``get_grad``).

    As Thunder's ``split_into_forward_and_backward`` (:func:`_split`): ``get_grad`` gives cotangents, which only
    the backward receives.
    """
    if not is_joint(trace):
        return []
    bsyms = trace.bound_symbols
    forward, cotangents, _ = _split(trace, bsyms[-1].args[0]) if split is None else split
    found: list[tuple[str, int, int]] = []
    for index in reversed(forward):
        for proxy in proxy_args(bsyms[index]):
            source = cotangents.get(proxy.name)
            if source is not None and source < index and all(f[0] != proxy.name for f in found):
                found.append((proxy.name, index, source))
    return found

def stale_after_in_place(trace: Any) -> list[tuple[str, int]]:
    """In a joint trace (the grad transform's, whose return holds ``fw_flat_out``, or ``grad_flat_args`` before
    Thunder #2147): each tensor the forward reads or returns after an in-place symbol updated it, where the
    forward needs none of that symbol's outputs, as (the tensor's name, index of the in-place symbol).

    The split (:func:`_split`) puts in the forward only what computes a value the forward needs, and a
    ``copy_`` into one: such an in-place symbol goes to the backward, and the forward reads the value from
    before the update. Thunder's ``insert_alias_updates`` makes every later reader read the in-place symbol's
    output, so a joint trace built after it never has one.
    """
    info = _split_info(trace)
    return [] if info is None else _split(trace, info)[2]

def _split(trace: Any, info: dict[str, Any]) -> tuple[list[int], dict[str, int], list[tuple[str, int]]]:
    """Thunder's ``split_into_forward_and_backward`` of this joint trace, whose return holds ``info``: (the
    indices of the forward's symbols, last first; each cotangent's name with the index of its ``get_grad``;
    the stale values of :func:`stale_after_in_place`).

    Walking back from the return, a symbol belongs to the forward if it outputs a name the forward needs (its
    outputs, its inputs, and what their producers read), or is an ``unpack_trivial``, or a ``copy_`` into a
    forward name; everything else goes to the backward.
    """
    bsyms = trace.bound_symbols
    outputs = info.get("fw_flat_out", info.get("output"))
    flat, _ = tree_flatten((outputs, info.get("flat_args", ())))  # type: ignore[no-untyped-call]
    needed = {p.name for p in flat if isinstance(p, Proxy)}
    cotangents: dict[str, int] = {}
    forward: list[int] = []
    stale: list[tuple[str, int]] = []
    for index in range(len(bsyms) - 2, -1, -1):
        bsym = bsyms[index]
        name = getattr(bsym.sym, "name", "")
        if name == "get_grad":
            cotangents.update((p.name, index) for p in proxy_outs(bsym))
            continue
        reads = [p.name for p in proxy_args(bsym)]
        if name == "unpack_trivial" or any(p.name in needed for p in proxy_outs(bsym)):
            forward.append(index)
            needed.update(reads)
            needed.update(p.name for p in proxy_outs(bsym))
        elif name == "copy_" and len(bsym.args) > 1 and getattr(bsym.args[1], "name", None) in needed:
            forward.append(index)
            needed.update(reads)
        elif reads and reads[0] in needed and updates_in_place(bsym):
            stale.append((reads[0], index))  # the forward reads reads[0] later, or returns it
    return forward, cotangents, stale


def untagged_backward(trace: Any) -> list[tuple[str, int]]:
    """In a joint trace whose backward symbols carry ``BoundSymbolTag.BACKWARD``: each symbol that computes from
    a cotangent without that tag, as (the cotangent, index of the symbol). A fusion pass groups such a symbol
    with the forward (``data_dependent_partition`` reads the tag), and the forward then reads the cotangent.
    Fusion regions (which carry no tags of their own) and the return are not counted."""
    if not is_joint(trace):
        return []
    bsyms = trace.bound_symbols
    backward_tag = _BACKWARD_TAG
    if backward_tag is None or not any(backward_tag in (getattr(b, "tags", None) or ()) for b in bsyms):
        return []
    root: dict[str, str] = {}  # a name computed from a cotangent -> that cotangent
    found: list[tuple[str, int]] = []
    for index, bsym in enumerate(bsyms[:-1]):
        if getattr(bsym.sym, "name", "") == "get_grad":
            root.update((p.name, p.name) for p in proxy_outs(bsym))
            continue
        source = next((root[p.name] for p in proxy_args(bsym) if p.name in root), None)
        if source is None:
            continue
        root.update((p.name, source) for p in proxy_outs(bsym) if p.name not in root)
        if backward_tag not in (getattr(bsym, "tags", None) or ()) and not getattr(bsym.sym, "is_fusion", False):
            found.append((source, index))
    return found

def updates_in_place(bsym: Any) -> bool:
    """Whether ``bsym`` updates its first tensor argument in place, as Thunder reads it
    (``thunder.core.update_aliases._is_inplace_op``): its symbol is tagged IN_PLACE, or its last subsymbol is
    ``prims.copy_``."""
    if _IN_PLACE is not None and _IN_PLACE in (getattr(bsym.sym, "tags", None) or ()):
        return True
    subsymbols: Any = getattr(bsym, "subsymbols", None)
    return bool(subsymbols) and getattr(subsymbols[-1].sym, "id", None) == _COPY
