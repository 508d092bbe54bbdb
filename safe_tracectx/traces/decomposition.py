"""A symbol and its decomposition describing different tensors (``stale-proxy-after-swap``), read only.

A symbol's subsymbols say how its outputs are computed: a fusion region's are the code it runs, and a fusion
executor builds its region from a symbol's. A subsymbol output under one of the symbol's output names is that
output, the same tensor (Thunder #1628: a pass replaced the outputs' proxies and left the old ones, with the old
dtype, below). A prim whose arguments were made for another tensor than the one it reads
(:func:`~safe_tracectx.traces.swaps.made_for_another_tensor`) computes something else.
Both report through the ``add`` of :func:`~safe_tracectx.traces.checks.trace_findings`::

    >>> from thunder.core import prims
    >>> found = []
    >>> check_decomposition(prims.neg.bind(1.0, output=None), 0, lambda *a, **k: found.append(a))
    >>> found
    []
"""

from __future__ import annotations

from safe_tracectx._support.extras import require_thunder

require_thunder("safe_tracectx.traces.decomposition")

from typing import Any

from thunder.core.proxies import Proxy

from safe_tracectx.traces.bound_proxies import proxy_outs
from safe_tracectx.traces.swaps import (
    describe_metadata, made_for_another_tensor, other_tensor, tensor_metadata,
)
from safe_tracectx.traces.violations import bsym_label

__all__ = ["check_decomposition", "made_for_another"]


def check_decomposition(bsym: Any, index: int, add: Any) -> None:
    """A symbol's subsymbols say how its outputs are computed (a fusion region's are the code it runs, and a fusion
    executor builds its region from a symbol's): a subsymbol output, at any depth, under one of the symbol's output
    names is that output, the same tensor (Thunder #1628: a pass replaced the outputs' proxies and left the old
    ones, with the old dtype, below). A first-level subsymbol prim is also read as :func:`made_for_another` says."""
    outs: dict[str, Proxy] | None = None
    for position, sub in enumerate(bsym.subsymbols):
        if (made := made_for_another_tensor(sub)) is not None:
            made_for_another(bsym, position, made, index, add)
        stack = [sub]
        while stack:
            current = stack.pop()
            for proxy in proxy_outs(current):
                if outs is None:
                    outs = {p.name: p for p in proxy_outs(bsym)}
                top = outs.get(proxy.name)
                if top is None or top is proxy:
                    continue
                stale = other_tensor(proxy, top, symbolic=True)
                if stale is not None:
                    inner = "" if current is sub else f", in its {getattr(current.sym, 'name', '?')}"
                    add("stale-proxy-after-swap", proxy.name,
                        f"{bsym_label(index, bsym)} outputs {proxy.name} as {stale[1]}, but its subsymbol {position} "
                        f"({getattr(sub.sym, 'name', '?')}{inner}) records {proxy.name} as {stale[0]}: a name is one "
                        "variable, and what reads the decomposition (a fusion executor builds its region from it, a "
                        "pass reads its proxies) sees another tensor than the symbol's output (a pass replaced the "
                        "symbol's output proxies and missed its subsymbols)", index)
            if current.subsymbols:
                stack.extend(current.subsymbols)


def made_for_another(bsym: Any, position: int | None, made: tuple[Proxy, str], index: int, add: Any) -> None:
    """A prim (the symbol, or its subsymbol ``position``) whose per-dimension argument was checked by its meta
    against another tensor than the one it reads: made for a tensor of another rank, it computes something else."""
    tensor, made_for = made
    prim = bsym if position is None else bsym.subsymbols[position]
    what = bsym_label(index, bsym) + ("" if position is None else f", its subsymbol {position}")
    read_as = describe_metadata(metadata) if (metadata := tensor_metadata(tensor)) is not None else \
        f"{len(tensor._shape)}-dimensional"
    add("stale-proxy-after-swap", tensor.name,
        f"{what} ({getattr(prim.sym, 'name', '?')}) was made for a {made_for} and reads {tensor.name}, "
        f"{read_as}: its arguments fit another tensor than the one it gets, so it computes something else (a pass "
        f"swapped the proxy it was made for for {tensor.name}, of another shape: a gradient put for a value of "
        "another shape, a missed swap)", index)
