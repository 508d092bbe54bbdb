"""The typed wrappers: each names its trace, registers there, and is recorded by the audit."""

from __future__ import annotations

import pytest
from thunder.core.devices import cpu
from thunder.core.dtypes import float32
from thunder.core.proxies import IntegerProxy, TensorProxy, variableify
from thunder.core.trace import TraceCtx, get_tracectx

from safe_tracectx import NameClashError, tracectx
from safe_tracectx.auditlog.log import AuditLog
from safe_tracectx.hooks import audit
from safe_tracectx.proxies import fresh_name, new_tensor_proxy, rename, rename_outputs


def test_fresh_name_registers_in_the_given_trace_only() -> None:
    trace, other = TraceCtx(), TraceCtx()
    with tracectx(other):
        name = fresh_name(trace, prefix="t")
    assert name in trace.names and name not in other.names


def test_new_tensor_proxy_is_owned_by_its_trace() -> None:
    trace = TraceCtx()
    proxy = new_tensor_proxy(trace=trace, shape=[2, 3], device="cpu", dtype="float32", requires_grad=True)
    assert isinstance(proxy, TensorProxy) and tuple(proxy.shape) == (2, 3) and proxy.requires_grad
    assert proxy.name in trace.names and get_tracectx() is None
    with pytest.raises(NameClashError, match="already taken"):
        new_tensor_proxy(trace=trace, shape=(1,), device=cpu, dtype=float32, name=proxy.name)
    assert len(trace.names) == 1


def test_rename_keeps_the_type_and_disambiguates() -> None:
    trace = TraceCtx()
    with tracectx(trace):
        t = TensorProxy("t0", shape=(1,), device=cpu, dtype=float32)
        i = IntegerProxy(name="i0", value=3)
    renamed = rename(t, "bw_t0", trace=trace)
    again = rename(t, "bw_t0", trace=trace)
    number = rename(i, "bw_i0", trace=trace)
    assert type(renamed) is TensorProxy and type(number) is IntegerProxy
    assert (renamed.name, again.name, number.name) == ("bw_t0", "bw_t0_0", "bw_i0")
    assert {"bw_t0", "bw_t0_0", "bw_i0"} <= trace.names


def test_rename_without_disambiguation_refuses_a_taken_name() -> None:
    trace = TraceCtx()
    with tracectx(trace):
        t = TensorProxy("t0", shape=(1,), device=cpu, dtype=float32)
    before = set(trace.names)
    with pytest.raises(NameClashError, match="already taken") as info:
        rename(t, "t0", trace=trace, disambiguate=False)
    assert __file__ in str(info.value) and trace.names == before


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda t, p: rename(p, 3, trace=t), "takes the new name as str, got int"),  # type: ignore[arg-type]
        (lambda t, p: rename("p", "x", trace=t), "takes a thunder Proxy, got str"),  # type: ignore[type-var]
        (lambda t, p: rename(p, "x", trace="t"), "rename\\(trace=...\\) takes a thunder TraceCtx, got str"),  # type: ignore[arg-type]
        (lambda t, p: fresh_name(None), "fresh_name\\(trace=...\\) takes a thunder TraceCtx, got NoneType"),  # type: ignore[arg-type]
        (lambda t, p: rename_outputs([], trace=5), "got int"),  # type: ignore[arg-type]
    ],
)
def test_bad_arguments_are_type_errors_that_change_nothing(call: object, message: str) -> None:
    trace = TraceCtx()
    with tracectx(trace):
        proxy = TensorProxy("t0", shape=(1,), device=cpu, dtype=float32)
    before = set(trace.names)
    with pytest.raises(TypeError, match=message):
        call(trace, proxy)  # type: ignore[operator]
    assert trace.names == before


def test_rename_outputs_returns_the_swap_map_and_honours_skip() -> None:
    from thunder.core import prims

    trace = TraceCtx()
    with tracectx(trace):
        a = TensorProxy("a", shape=(2,), device=cpu, dtype=float32)
        b = TensorProxy("b", like=a)
        c = TensorProxy("c", like=a)
    bsyms = [prims.neg.bind(a, output=b), prims.neg.bind(b, output=c)]
    swap = rename_outputs(bsyms, trace=trace, skip={"c"})
    assert {k.proxy.name: v.name for k, v in swap.items()} == {"b": "bw_b"}
    rewritten = bsyms[1].from_bsym_swap_proxies(swap)
    assert rewritten.flat_proxy_args[0].name == "bw_b"
    assert variableify(b) in swap


def test_the_audit_records_every_wrapper_call() -> None:
    trace = TraceCtx()
    with audit() as log:
        fresh_name(trace)
        proxy = new_tensor_proxy(trace=trace, shape=(1,), device=cpu, dtype=float32)
        rename(proxy, "renamed", trace=trace)
    created = [e for e in log.events if e.kind == "proxy_created"]
    assert len(created) == 3
    assert all(e.site is not None and e.site.filename == __file__ for e in created)
    assert {e.trace_id for e in created} == {id(trace)}


def test_without_hooks_an_active_log_still_records_wrappers() -> None:
    log = AuditLog()
    log.start()
    try:
        fresh_name(TraceCtx())
    finally:
        log.stop()
    assert log.counts["proxy_created"] == 1


# ---- bad input to the typed wrappers ----------------------------------------------------------------

from collections.abc import Callable  # noqa: E402


def fresh_proxy(trace: TraceCtx) -> TensorProxy:
    with tracectx(trace):
        proxy = TensorProxy("kept", shape=(1,), device=cpu, dtype=float32)
    return proxy


@pytest.mark.parametrize(
    ("call", "error", "message"),
    [
        (lambda t: new_tensor_proxy(trace=t, shape=(-3,), device="cpu", dtype="float32"), ValueError, "non-negative"),
        (lambda t: new_tensor_proxy(trace=t, shape=(2,), device="bogus", dtype="float32"), ValueError, "not a device"),
        (lambda t: new_tensor_proxy(trace=t, shape=(2,), device="cpu", dtype="float99"), ValueError, "not a dtype"),
        (lambda t: rename(fresh_proxy(t), "", trace=t), ValueError, "not a valid proxy name"),
        (lambda t: rename(fresh_proxy(t), "has space", trace=t), ValueError, "not a valid proxy name"),
        (lambda t: rename(fresh_proxy(t), "def", trace=t), ValueError, "not a valid proxy name"),
        (lambda t: fresh_name(t, prefix=5), TypeError, "prefix as str"),  # type: ignore[arg-type]
    ],
)
def test_typed_wrappers_refuse_bad_input_and_register_nothing(
    call: Callable[[TraceCtx], object], error: type, message: str
) -> None:
    trace = TraceCtx()
    with pytest.raises(error, match=message):
        call(trace)
    assert trace.names - {"kept"} == set()
