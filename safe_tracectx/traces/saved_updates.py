"""A value saved for the backward that the forward then updates in place (``handover-mismatch``).

The forward hands its backward the tensors it saved when it returns, so a
saved name holds what its storage holds at the end of the forward. A name is
one value: when the forward writes into that storage after the name was
defined (a ``copy_`` into it, or into a later name ``update_aliases`` hands it
on as), the backward reads the updated values where its gradient formula means
the name's. Eager PyTorch keeps what it saved (or refuses, "modified by an
inplace operation"). ``h = x * 1; h.mul_(y); return h`` gives ``y`` the
gradient ``x * y`` where eager gives ``x``, silently (Thunder 0.2.6 and main).
Reads only::

    >>> import torch, thunder
    >>> from safe_tracectx.traces.saved_updates import updated_after_saving
    >>> jitted = thunder.jit(lambda x: (x * 2).sin())
    >>> jitted(torch.ones(2, requires_grad=True)).sum().backward()
    >>> updated_after_saving(thunder.last_traces(jitted)[-1], thunder.last_backward_traces(jitted)[-1])
    []
"""

from __future__ import annotations

from safe_tracectx._support.extras import require_thunder

require_thunder("safe_tracectx.traces.saved_updates")

from collections.abc import Iterator
from typing import Any, Final

from thunder.core.proxies import Proxy, TensorProxy

from safe_tracectx._support.labels import describe_trace
from safe_tracectx.traces.bound_proxies import proxy_args, proxy_outs
from safe_tracectx.traces.grad_mode import tensor_outs, written
from safe_tracectx.traces.gradient_flow import handed_on
from safe_tracectx.traces.program import Program
from safe_tracectx.traces.returns import is_return
from safe_tracectx.traces.violations import Violation, bsym_label

__all__ = ["updated_after_saving"]

#: What a backward does with a saved tensor that reads none of its values (the gradient of detach is none).
_NOT_READING: Final = frozenset({
    "del", "python_del", "clear_mutable_collection", "python_return", "return", "shape", "detach_vjp",
    "unpack_sequence", "unpack_trivial", "zeros_like", "ones_like", "empty_like", "full_like", "randn_like", "rand_like",
})


def updated_after_saving(fw: Any, bw: Any) -> list[Violation]:
    """Each saved tensor of forward ``fw`` whose values backward ``bw`` reads and that ``fw`` updates in place
    after defining it (through its own name or an alias of its storage), named by the backward's name for it."""
    saved, unpacked = Program(fw).saved_for_backward(), Program(bw).unpacked_saved()
    if not saved or not unpacked or unpacked[0] is None:
        return []
    pairs = {a.name: b.name for a, b in zip(saved[0], unpacked[0]) if isinstance(a, TensorProxy) and isinstance(b, Proxy)}
    read: set[str] | None = None  # what the backward reads, found only once a saved tensor is updated (rarely)
    storage = _Storages()
    defined: set[str] = set()
    found: list[Violation] = []
    for label, bsym in _statements(fw.bound_symbols):
        into = _written(bsym)
        for name in into:
            root = storage.find(name)
            for given in [n for n in pairs if n in defined and storage.find(n) == root]:
                read = _values_read(bw) if read is None else read
                if pairs[given] not in read:
                    continue
                found.append(Violation(
                    "handover-mismatch", pairs.pop(given),
                    f"the forward saves {given} for the backward, then {label} updates it in place "
                    f"(writing {name}): the backward reads {given}'s storage as the forward leaves it, the updated "
                    f"values, where its gradient formula means {given}'s, so the gradients are other than eager "
                    "PyTorch's (which keeps what it saved, or refuses the update), silently",
                    f"saved tensors of {describe_trace(fw)} and {describe_trace(bw)}",
                    also=(given, name) if given != name else (),
                ))
        storage.record(bsym, into)
        defined.update(p.name for p in tensor_outs(bsym))
    return found


def _statements(bsyms: list[Any]) -> Iterator[tuple[str, Any]]:
    """Each top-level bound symbol with its label, a fusion region's as its statements in order (a region saves what
    it computes and may update it inside: its outputs are defined before its end)."""
    for index, bsym in enumerate(bsyms):
        if getattr(bsym.sym, "is_fusion", False):
            yield from ((f"{bsym_label(index, bsym)}'s {getattr(sub.sym, 'name', '?')}", sub) for sub in bsym.subsymbols)
        else:
            yield bsym_label(index, bsym), bsym


def _written(bsym: Any) -> set[str]:
    """What ``bsym`` writes into: ``copy_``'s destination in a decomposition (:func:`written`), or the destination of
    an executor's ``copy_`` in a trace about to run (the prim's order, ``copy_(source, destination)``)."""
    args = bsym.args
    if getattr(bsym.sym, "name", "") == "copy_" and not bsym.subsymbols and len(args) > 1:
        return {args[1].name} if isinstance(args[1], TensorProxy) else set()
    return written(bsym)


def _values_read(bw: Any) -> set[str]:
    """The names whose values reach what backward ``bw`` returns (not only unpacked, freed, asked the shape of, or
    read by a symbol whose result reaches the gradients only through detach's vjp, which gives zeros): a walk
    back from the return. A symbol that defines nothing (a check) or writes into a tensor counts as reading."""
    reaching: set[str] = set()
    for bsym in reversed(bw.bound_symbols):
        name = getattr(bsym.sym, "name", "")
        if is_return(bsym):
            reaching.update(p.name for p in proxy_args(bsym))
        elif name not in _NOT_READING:
            outs = {p.name for p in proxy_outs(bsym)}
            if not outs or outs & reaching or written(bsym):
                reaching.update(p.name for p in proxy_args(bsym))
    return reaching


class _Storages:
    """Names of one tensor in a forward: an alias under the name ``update_aliases`` hands it on as (not the other
    aliases of its group, which may hold other parts: a KV cache's rows), and an in-place symbol's outputs with what
    it writes (a union-find by name)."""

    __slots__ = ("parent",)

    def __init__(self) -> None:
        self.parent: dict[str, str] = {}

    def find(self, name: str) -> str:
        while (up := self.parent.get(name, name)) != name:
            name = self.parent[name] = self.parent.get(up, up)
        return name

    def union(self, names: list[str]) -> None:
        roots = [self.find(n) for n in names]
        for root in roots[1:]:
            if root != roots[0]:
                self.parent[root] = roots[0]

    def record(self, bsym: Any, into: set[str]) -> None:
        outs = [p.name for p in tensor_outs(bsym)]
        if getattr(bsym.sym, "name", "") == "update_aliases":  # prims' or an executor's (Thunder >= 0.2.4)
            for given, handed in handed_on(bsym):
                self.union([given.name, handed.name])  # one alias under its next name; the group's others may be other parts
        elif into:
            self.union([*sorted(into), *outs])
