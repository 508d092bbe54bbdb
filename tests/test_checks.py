"""check_trace and check_forward_backward: each violation kind, and purity on real traces."""

from __future__ import annotations

import warnings
from typing import Any

import pytest
import torch
from thunder.core import prims
from thunder.core.devices import cpu
from thunder.core.dtypes import float32
from thunder.core.proxies import TensorProxy, variableify
from thunder.core.symbol import BoundSymbol, Symbol
from thunder.core.trace import TraceCtx, from_trace

from safe_tracectx import LeakedProxyError, NameClashError, scratch_trace, traceless, tracectx
from safe_tracectx.checks import Violation, check_forward_backward, check_trace

with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    import thunder


def _kinds(violations: list[Violation]) -> set[tuple[str, str]]:
    return {(v.kind, v.name) for v in violations}


def _state(trace: TraceCtx) -> tuple[object, ...]:
    return (trace.names, frozenset(trace.names), tuple(map(id, trace.bound_symbols)), trace.name_ctr)


def _trace_with_input() -> tuple[TraceCtx, TensorProxy]:
    trace = TraceCtx()
    with tracectx(trace):
        a = TensorProxy("a", shape=(2,), device=cpu, dtype=float32)
    trace.args = (a,)
    return trace, a


@pytest.fixture(scope="module")
def jitted_traces() -> tuple[list[TraceCtx], list[TraceCtx]]:
    def f(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
        return torch.nn.functional.gelu(x @ w).sum()

    jf = thunder.jit(f)
    x, w = torch.randn(4, 4, requires_grad=True), torch.randn(4, 4, requires_grad=True)
    jf(x, w).backward()
    return thunder.last_traces(jf), thunder.last_backward_traces(jf)


def test_clean_on_every_trace_thunder_keeps_and_reads_only(jitted_traces: tuple[list[TraceCtx], list[TraceCtx]]) -> None:
    fws, bws = jitted_traces
    for trace in [*fws, *bws]:
        before = _state(trace)
        assert check_trace(trace) == []
        assert _state(trace) == before
    assert check_forward_backward(fws[-1], bws[-1]) == []


def test_unlike_thunders_check_trace_nothing_is_registered(jitted_traces: tuple[list[TraceCtx], list[TraceCtx]]) -> None:
    from thunder.dev_utils.check_trace import check_trace as thunders_check

    trace = jitted_traces[0][0]
    before = len(trace.names)
    check_trace(trace)
    assert len(trace.names) == before
    thunders_check(trace)
    assert len(trace.names) > before  # the behaviour this package exists to catch


def test_use_before_definition_and_unregistered_name() -> None:
    trace, a = _trace_with_input()
    with scratch_trace() as scratch:
        ghost = TensorProxy("ghost", shape=(2,), device=cpu, dtype=float32)
    with tracectx(trace):
        out = TensorProxy("out", like=a)
    trace.bound_symbols.append(prims.add.bind(a, ghost, output=out))
    assert _kinds(check_trace(trace)) == {("use-before-definition", "ghost"), ("unregistered-name", "ghost")}
    assert scratch.created_names == ("ghost",)


def test_ssa_redefinition_and_name_clash() -> None:
    trace, a = _trace_with_input()
    with tracectx(trace):
        first = TensorProxy("b", like=a)
    with scratch_trace() as scratch:
        second = TensorProxy("b", like=a)  # another proxy, same name
    trace.bound_symbols += [prims.neg.bind(a, output=first), prims.neg.bind(a, output=second), prims.neg.bind(second, output=None)]
    kinds = _kinds(check_trace(trace))
    assert ("ssa-redefinition", "b") in kinds and ("name-clash", "b") in kinds
    assert scratch.names != trace.names


def test_traceless_proxy_smuggled_into_a_trace() -> None:
    trace, a = _trace_with_input()
    with traceless():
        smuggled = TensorProxy(shape=(2,), device=cpu, dtype=float32)
    with tracectx(trace):
        out = TensorProxy("out", like=a)
    trace.bound_symbols.append(prims.add.bind(a, smuggled, output=out))
    violations = check_trace(trace)
    leaked = [v for v in violations if v.kind == "traceless-proxy"]
    assert [v.name for v in leaked] == [smuggled.name]
    error = leaked[0].to_error()
    assert isinstance(error, LeakedProxyError) and "recreate it inside `with tracectx(trace):`" in str(error)


def _fusion(name: str, inputs: tuple[TensorProxy, ...], output: TensorProxy, subsymbols: list[BoundSymbol]) -> BoundSymbol:
    return Symbol(name=name, meta=None, is_fusion=True).bind(*inputs, output=output, subsymbols=subsymbols)


def test_two_fusion_regions_with_one_name_for_different_proxies() -> None:
    trace, a = _trace_with_input()
    with tracectx(trace):
        inner0, out0, out1 = (TensorProxy(n, like=a) for n in ("x0", "o0", "o1"))
    with scratch_trace():
        inner1 = TensorProxy("x0", like=a)  # region 1's intermediate reuses region 0's name
    trace.bound_symbols += [
        _fusion("Fusion0", (a,), out0, [prims.neg.bind(a, output=inner0), prims.add.bind(inner0, a, output=out0)]),
        _fusion("Fusion1", (out0,), out1, [prims.neg.bind(out0, output=inner1), prims.add.bind(inner1, out0, output=out1)]),
    ]
    violations = [v for v in check_trace(trace) if v.kind == "fusion-name-clash"]
    assert [v.name for v in violations] == ["x0"]
    assert "fusion region Fusion0" in violations[0].message and "fusion region Fusion1" in violations[0].message
    assert isinstance(violations[0].to_error(), NameClashError)


def test_clean_fusion_regions_pass() -> None:
    trace, a = _trace_with_input()
    with tracectx(trace):
        inner0, out0, inner1, out1 = (TensorProxy(n, like=a) for n in ("x0", "o0", "x1", "o1"))
    trace.bound_symbols += [
        _fusion("Fusion0", (a,), out0, [prims.neg.bind(a, output=inner0), prims.add.bind(inner0, a, output=out0)]),
        _fusion("Fusion1", (out0,), out1, [prims.neg.bind(out0, output=inner1), prims.add.bind(inner1, out0, output=out1)]),
    ]
    assert check_trace(trace) == []


def _not_handed_over(fw: TraceCtx, bw: TraceCtx) -> object:
    """A forward bound symbol whose outputs the backward does not receive."""
    received = {p.name for b in bw.bound_symbols if b.sym.name.startswith("unpack") for p in b.flat_proxy_outs}
    return next(
        b
        for b in fw.bound_symbols
        if b.flat_proxy_outs and not b.sym.name.startswith("unpack") and not {p.name for p in b.flat_proxy_outs} & received
    )


def test_forward_name_reused_in_backward_is_a_clash(jitted_traces: tuple[list[TraceCtx], list[TraceCtx]]) -> None:
    fw, bw = jitted_traces[0][-1], jitted_traces[1][-1]
    recomputed: Any = _not_handed_over(fw, bw)
    tampered = from_trace(bw)
    tampered.bound_symbols = [*bw.bound_symbols[:-1], recomputed, bw.bound_symbols[-1]]
    clashes = check_forward_backward(fw, tampered)
    assert {v.name for v in clashes} == {p.name for p in recomputed.flat_proxy_outs}
    assert all(v.kind == "forward-backward-clash" for v in clashes)
    assert "rename_outputs" in clashes[0].fix


def test_the_hand_over_is_not_a_clash(jitted_traces: tuple[list[TraceCtx], list[TraceCtx]]) -> None:
    fw, bw = jitted_traces[0][-1], jitted_traces[1][-1]
    saved = {p.name for b in bw.bound_symbols if b.sym.name.startswith("unpack") for p in b.flat_proxy_outs}
    fw_defined = {p.name for b in fw.bound_symbols for p in b.flat_proxy_outs}
    assert saved & fw_defined, "the backward receives forward values"
    assert check_forward_backward(fw, bw) == []


def test_renamed_recompute_is_not_a_clash(jitted_traces: tuple[list[TraceCtx], list[TraceCtx]]) -> None:
    from safe_tracectx.proxies import rename_outputs

    fw, bw = jitted_traces[0][-1], jitted_traces[1][-1]
    recomputed: Any = _not_handed_over(fw, bw)
    tampered = from_trace(bw)
    tampered.names = set(bw.names)
    swap = rename_outputs([recomputed], trace=tampered, prefix="bw_")
    renamed = recomputed.from_bsym_swap_proxies(swap, skip_inputs=True)
    tampered.bound_symbols = [*bw.bound_symbols[:-1], renamed, bw.bound_symbols[-1]]
    assert check_forward_backward(fw, tampered) == []
    assert all(variableify(p) in swap for p in recomputed.flat_proxy_outs)


def test_bad_input_is_a_type_error() -> None:
    with pytest.raises(TypeError, match="check_trace\\(\\) takes a thunder TraceCtx, got str"):
        check_trace("trace")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="bw must be a thunder TraceCtx, got int"):
        check_forward_backward(TraceCtx(), 3)  # type: ignore[arg-type]
