"""Trace checks that never modify the trace they read.

A superset of ``thunder.dev_utils.check_trace.check_trace`` that, unlike it,
makes no trace active and registers no name::

    >>> import torch, thunder
    >>> from safe_tracectx.checks import check_trace
    >>> jitted = thunder.jit(lambda x: x.sin() * 2)
    >>> _ = jitted(torch.ones(2))
    >>> check_trace(thunder.last_traces(jitted)[-1])
    []
"""

from __future__ import annotations

from safe_tracectx.extras import require_thunder

require_thunder("safe_tracectx.checks")

import dataclasses
from collections.abc import Iterable, Iterator
from typing import Any, Final, Literal

from thunder.core.proxies import Proxy
from thunder.core.pytree import tree_flatten
from thunder.core.trace import TraceCtx

from safe_tracectx.arguments import expect_trace
from safe_tracectx.bound_proxies import proxy_args, proxy_outs
from safe_tracectx.callsite import CallSite
from safe_tracectx.context.traceless_proxies import is_traceless, traceless_proxies_made
from safe_tracectx.errors import BrokenTraceError, LeakedProxyError, NameClashError, TraceContextError
from safe_tracectx.labels import describe_trace

__all__ = ["Violation", "ViolationKind", "check_forward_backward", "check_trace"]

ViolationKind = Literal[
    "ssa-redefinition",
    "use-before-definition",
    "unregistered-name",
    "name-clash",
    "fusion-name-clash",
    "traceless-proxy",
    "forward-backward-clash",
    "borrowed-namer",
]

_FIXES: Final[dict[str, str]] = {
    "ssa-redefinition": "give the new proxy a fresh name (safe_tracectx.proxies.rename with the owning trace)",
    "use-before-definition": "define the proxy before its first use, or reorder the bound symbols",
    "unregistered-name": "name proxies while their trace is active (or commit scratch names with commit_names(into=trace))",
    "name-clash": "one name must mean one proxy: rename one of them in a scratch_trace that reserves this trace",
    "fusion-name-clash": "names must be unique across fusion regions for rematerialization: rename in a scratch_trace "
    "that reserves the whole trace",
    "traceless-proxy": "traceless proxies must never enter a trace: recreate it inside `with tracectx(trace):`",
    "forward-backward-clash": "rename the backward's recomputed outputs (rename_outputs(bsyms, trace=bw, prefix='bw_'))",
    "borrowed-namer": "name the proxy with the trace it goes into (tracectx(bw)), or in scratch_trace(fw, bw) and "
    "commit_names(into=bw)",
}


_ERRORS: Final[dict[str, type[TraceContextError]]] = {
    "traceless-proxy": LeakedProxyError,
    "use-before-definition": BrokenTraceError,
}


@dataclasses.dataclass(frozen=True)
class Violation:
    """One problem found in a trace: its kind, the name involved, where, and the fix."""

    kind: ViolationKind
    name: str
    message: str
    where: str

    @property
    def fix(self) -> str:
        return _FIXES[self.kind]

    def to_error(self, site: CallSite | None = None, *, context: str = "") -> TraceContextError:
        """The error a policy acts on: LeakedProxyError for traceless proxies, BrokenTraceError for a use
        before definition (a broken trace, not a naming bug), else NameClashError."""
        error_type = _ERRORS.get(self.kind, NameClashError)
        return error_type(f"{context}{self.message} ({self.where})", fix=self.fix, site=site)

    def __str__(self) -> str:
        return f"{self.kind}: {self.message} ({self.where})"


def _bsym_label(index: int, bsym: Any, region: str | None = None) -> str:
    name = getattr(getattr(bsym, "sym", None), "name", "?")
    return f"bound symbol {index} ({name})" + (f" in {region}" if region else "")


def _input_proxies(trace: TraceCtx) -> list[Proxy]:
    try:
        flat, _ = tree_flatten((trace.args, trace.kwargs))  # type: ignore[no-untyped-call]
    except Exception:  # noqa: BLE001 - unusual argument containers: no inputs to seed
        return []
    return [p for p in flat if isinstance(p, Proxy)]


def _walk_region(bsyms: Iterable[Any]) -> Iterator[Proxy]:
    for bsym in bsyms:
        yield from proxy_args(bsym)
        yield from proxy_outs(bsym)
        yield from _walk_region(bsym.subsymbols)


def check_trace(trace: TraceCtx) -> list[Violation]:
    """Every violation in ``trace``; reads only (no name is registered, nothing is made active)."""
    expect_trace(trace, "check_trace()")
    violations: list[Violation] = []
    registered = trace.names
    defined: set[str] = set()  # the names of top-level proxies
    first_inputs: dict[str, Proxy] = {}  # name -> the first input proxy with it
    # ids of proxies a bound symbol has used or defined and that are their name's first
    # proxy: met again, such a proxy adds nothing new (each violation is reported once per
    # kind and name), so it is skipped by one id lookup, with no name read, nothing kept
    # for the garbage collector. The trace holds every proxy, so no id is reused meanwhile.
    settled: set[int] = set()
    region_owners: dict[str, tuple[Proxy, str]] = {}  # names met first inside a fusion region
    reported: set[tuple[str, str]] = set()
    look_for_traceless = traceless_proxies_made()  # no per-proxy lookup until one exists
    bsym: Any = None
    index = -1

    def add(kind: ViolationKind, name: str, message: str, where: str | None = None) -> None:
        if (kind, name) not in reported:
            reported.add((kind, name))
            violations.append(Violation(kind, name, message, where or _bsym_label(index, bsym)))

    def first_with_its_name(proxy: Proxy, name: str) -> bool:
        """For a defined ``name``: is ``proxy`` the first top-level proxy with it?"""
        return id(proxy) in settled or first_inputs.get(name) is proxy

    def own(proxy: Proxy, name: str, region: str, where: str | None = None) -> None:
        """One name is one proxy across fusion regions and the top level ("the trace")."""
        if look_for_traceless and is_traceless(proxy):
            add("traceless-proxy", name, f"traceless proxy {name} is used in {describe_trace(trace)}", where)
        previous = region_owners.get(name)
        if previous is not None:
            another, first_region = previous[0] is not proxy, previous[1]
        elif name in defined:
            another, first_region = not first_with_its_name(proxy, name), "the trace"
        else:
            region_owners[name] = (proxy, region)
            return
        if another and first_region != region:
            add("fusion-name-clash", name, f"name {name} is one proxy in {first_region} and another in {region}", where)

    def use(proxy: Proxy) -> None:
        name = proxy.name
        if name not in defined:
            add("use-before-definition", name, f"{name} is used before any bound symbol defines it")
            defined.add(name)
            settled.add(id(proxy))
        elif first_inputs.get(name) is proxy:
            settled.add(id(proxy))
        else:
            add("name-clash", name, f"{name} names two different proxies")
        if name not in registered:
            add("unregistered-name", name, f"{name} is not registered in the trace's names")
        own(proxy, name, "the trace")

    for proxy in _input_proxies(trace):
        name = proxy.name
        if name not in defined:
            defined.add(name)
            first_inputs[name] = proxy
        own(proxy, name, "the trace", "trace inputs")

    for index, bsym in enumerate(trace.bound_symbols):
        for proxy in proxy_args(bsym):
            if id(proxy) not in settled:
                use(proxy)
        for proxy in proxy_outs(bsym):
            key = id(proxy)
            if key in settled:
                continue
            name = proxy.name
            if name not in defined:
                defined.add(name)
                settled.add(key)
            elif first_inputs.get(name) is proxy:
                settled.add(key)
            else:
                add("ssa-redefinition", name, f"{name} is defined again by a different proxy")
            if name not in registered:
                add("unregistered-name", name, f"{name} is not registered in the trace's names")
            if look_for_traceless or region_owners:
                own(proxy, name, "the trace")
        if getattr(bsym.sym, "is_fusion", False):
            region = f"fusion region {bsym.sym.name}"
            for proxy in _walk_region(bsym.subsymbols):
                own(proxy, proxy.name, region)
    return violations


def _defined_names(trace: TraceCtx, *, skip_unpack: bool) -> dict[str, str]:
    """name -> where, for every proxy a top-level bound symbol outputs.

    Names internal to a fusion region are locals of the fusion's callable, so they
    cannot clash across traces; check_trace checks them within a trace.
    """
    names: dict[str, str] = {}
    bsym: Any
    for index, bsym in enumerate(trace.bound_symbols):
        if skip_unpack and bsym.sym.name.startswith("unpack"):
            continue
        for proxy in proxy_outs(bsym):
            names.setdefault(proxy.name, _bsym_label(index, bsym))
    return names


def check_forward_backward(fw: TraceCtx, bw: TraceCtx) -> list[Violation]:
    """Names defined in both ``fw`` and ``bw`` other than by the backward unpacking its inputs.

    The hand-over (the saved-for-backward values the backward unpacks) is expected
    to carry forward names; any other backward definition of a forward name is a clash.
    """
    expect_trace(fw, "check_forward_backward() fw", verb="must be")
    expect_trace(bw, "check_forward_backward() bw", verb="must be")
    fw_names = _defined_names(fw, skip_unpack=False)
    bw_names = _defined_names(bw, skip_unpack=True)
    return [
        Violation(
            "forward-backward-clash",
            name,
            f"{name} is defined in the forward trace ({fw_names[name]}) and again in the backward trace",
            bw_names[name],
        )
        for name in sorted(fw_names.keys() & bw_names.keys())
    ]
