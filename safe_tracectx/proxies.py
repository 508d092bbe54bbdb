"""Typed wrappers for executor and transform authors: every proxy-creating call names its trace.

    >>> from thunder.core.trace import TraceCtx
    >>> from safe_tracectx.proxies import fresh_name, new_tensor_proxy, rename
    >>> trace = TraceCtx()
    >>> t = new_tensor_proxy(trace=trace, shape=(2,), device="cpu", dtype="float32")
    >>> renamed = rename(t, "bw_" + t.name, trace=trace)
    >>> renamed.name, type(renamed).__name__, sorted(trace.names)
    ('bw_t0', 'TensorProxy', ['bw_t0', 't0'])
"""

from __future__ import annotations

from safe_tracectx._support.extras import require_thunder

require_thunder("safe_tracectx.proxies")

from collections.abc import Collection, Iterable
from typing import Any, TypeVar

from thunder.core.proxies import Proxy, TensorProxy, Variable, variableify
from thunder.core.symbol import BoundSymbol
from thunder.core.trace import TraceCtx

from safe_tracectx._support import events
from safe_tracectx._support.arguments import expect_name, expect_prefix, expect_shape, expect_trace, to_device, to_dtype
from safe_tracectx._support.callsite import find_call_site
from safe_tracectx._support.labels import describe_trace
from safe_tracectx.context.active_trace import tracectx
from safe_tracectx.errors import NameClashError

__all__ = ["fresh_name", "new_tensor_proxy", "rename", "rename_outputs"]

P = TypeVar("P", bound=Proxy)


def _record(trace: TraceCtx, name: str, function: str, *, named_by_hook: bool = True) -> None:
    # With the hooks installed, the naming hook already records every proxy it names.
    if events.proxy_sinks and not (named_by_hook and events.naming_hooked.on):
        events.proxy_created(trace, name, via=function)


def fresh_name(trace: TraceCtx, *, prefix: str | None = None) -> str:
    """A new name, registered in ``trace``."""
    expect_trace(trace, "fresh_name(trace=...)")
    prefix = expect_prefix(prefix, "fresh_name()")
    name: str = trace.make_name(prefix=prefix)
    _record(trace, name, "fresh_name", named_by_hook=False)
    return name


def new_tensor_proxy(
    *,
    trace: TraceCtx,
    shape: Iterable[int],
    device: Any,
    dtype: Any,
    requires_grad: bool = False,
    name: str | None = None,
    prefix: str | None = None,
) -> TensorProxy:
    """A ``TensorProxy`` owned by ``trace`` (its name registered there).

    ``device`` and ``dtype`` may be Thunder's or torch's, or strings ("cpu", "float32").
    """
    where = "new_tensor_proxy()"
    expect_trace(trace, "new_tensor_proxy(trace=...)")
    dims = expect_shape(shape, where)
    thunder_device, thunder_dtype = to_device(device, where), to_dtype(dtype, where)
    prefix = expect_prefix(prefix, where)
    if name is not None:
        expect_name(name, "new_tensor_proxy(name=...)")
        if name in trace.names:
            raise NameClashError(
                f"new_tensor_proxy(name={name!r}): the name is already taken in {describe_trace(trace)}",
                fix="leave name=None for a fresh name, or pick a name the trace does not have",
                site=find_call_site(),
            )
    names_before = set(trace.names)
    try:
        with tracectx(trace):
            proxy = TensorProxy(
                name, shape=dims, device=thunder_device, dtype=thunder_dtype, requires_grad=requires_grad, prefix=prefix
            )
    except BaseException:
        trace.names.intersection_update(names_before)  # nothing stays registered
        raise
    _record(trace, proxy.name, "new_tensor_proxy")
    return proxy


def rename(proxy: P, name: str, *, trace: TraceCtx, disambiguate: bool = True) -> P:
    """A copy of ``proxy`` named ``name`` in ``trace`` (same proxy type).

    With ``disambiguate=True`` a taken name becomes ``name_0``, ``name_1``, ...;
    with ``False`` a taken name raises NameClashError.
    """
    if not isinstance(proxy, Proxy):
        raise TypeError(f"rename() takes a thunder Proxy, got {type(proxy).__name__}")
    expect_name(name, "rename(proxy, name)")
    expect_trace(trace, "rename(trace=...)")
    if not disambiguate and name in trace.names:
        raise NameClashError(
            f"rename({proxy.name!r} -> {name!r}): the name is already taken in {describe_trace(trace)}",
            fix="pass disambiguate=True (name_0, name_1, ...) or choose another name",
            site=find_call_site(),
        )
    with tracectx(trace):
        renamed = proxy.replace_name(name, disambiguate=disambiguate)
    if type(renamed) is not type(proxy):  # pragma: no cover - every Thunder proxy keeps its type
        raise TypeError(f"{type(proxy).__name__}.replace_name returned a {type(renamed).__name__}")
    _record(trace, renamed.name, "rename")
    result: P = renamed
    return result


def rename_outputs(
    bsyms: Iterable[BoundSymbol], *, trace: TraceCtx, prefix: str = "bw_", skip: Collection[str] = ()
) -> dict[Variable, Proxy]:
    """Rename every output proxy of ``bsyms`` to ``prefix + name`` in ``trace``; return Thunder's swap map.

    Outputs named in ``skip`` keep their names. Use the map with
    ``bsym.from_bsym_swap_proxies(swap_map)`` to rewrite the recomputed symbols and their users.
    """
    expect_trace(trace, "rename_outputs(trace=...)")
    expect_prefix(prefix, "rename_outputs()")
    swap_map: dict[Variable, Proxy] = {}
    for bsym in bsyms:
        for output in bsym.flat_proxy_outs:
            key = variableify(output)
            if output.name in skip or key in swap_map:
                continue
            swap_map[key] = rename(output, prefix + output.name, trace=trace, disambiguate=True)
    return swap_map
