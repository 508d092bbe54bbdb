"""stale-proxy-after-swap: a symbol that reads a name as another tensor (shape or dtype) than the one the name holds
(#1964's class: a pass swaps proxies and misses a use, a nested one), on traces of real thunder.jit compiles."""

from __future__ import annotations

import warnings
from typing import Any

import pytest
import torch
from thunder.core import prims
from thunder.core.proxies import TensorProxy
from thunder.core.trace import TraceCtx, from_trace

import safe_tracectx as stc
from safe_tracectx import STRICT, BrokenTraceError, TraceContextWarning, tracectx
from safe_tracectx.hooks import installed
from safe_tracectx.traces.checks import check_trace, trace_findings

with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    import thunder
    from thunder.core.transform_common import Transform


def _concat(x: torch.Tensor, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    return x * torch.cat([a, b], 0)


def _inputs() -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    return torch.randn(4, 3), torch.randn(2, 3), torch.randn(2, 3)


def _computation() -> TraceCtx:
    """The computation trace of a real compile of ``x * torch.cat([a, b], 0)``, as the interpretation made it."""
    jitted = thunder.jit(_concat)
    jitted(*_inputs())
    trace: TraceCtx = thunder.last_traces(jitted)[0]
    assert [p.name for p in trace.args] == ["x", "a", "b"]
    return trace


def _swap_top_level(trace: TraceCtx, rows: int) -> tuple[TraceCtx, TensorProxy, TensorProxy]:
    """A pass as #1964's FSDP transform: the trace's input ``a`` becomes a new proxy of the same name with
    ``rows`` rows, swapped where it is a top-level positional argument only (the cat reads it inside a list).
    Also (the old proxy, the new one)."""
    old = next(p for p in trace.args if p.name == "a")
    with tracectx(TraceCtx()):  # another trace's namer: the name "a" is the trace's already
        new = TensorProxy("a", shape=(rows, 3), device=old.device, dtype=old.dtype)
    swapped = from_trace(trace)
    swapped.args = tuple(new if p is old else p for p in trace.args)
    for bsym in trace.bound_symbols:
        if bsym.sym is prims.unpack_trivial and bsym.output is old:
            swapped.bound_symbols.append(bsym.from_bsym(output=new))
        else:
            swapped.bound_symbols.append(bsym.from_bsym(args=tuple(new if a is old else a for a in bsym.args)))
    return swapped, old, new


def _cat_index(trace: TraceCtx) -> int:
    return next(i for i, b in enumerate(trace.bound_symbols) if b.sym.name == "cat")


def test_a_nested_use_the_swap_missed_reads_the_name_as_another_tensor() -> None:
    trace = _computation()
    assert check_trace(trace) == []
    swapped, old, new = _swap_top_level(trace, rows=1)
    cat = swapped.bound_symbols[_cat_index(swapped)]
    assert any(a is old for a in cat.args[0]) and not any(a is new for a in cat.args[0])  # the missed, nested use
    before = (tuple(map(id, swapped.bound_symbols)), frozenset(swapped.names), old.shape, new.shape)
    violations, notes = trace_findings(swapped)
    assert [(v.kind, v.name) for v in violations] == [("stale-proxy-after-swap", "a")] and notes == []
    (violation,) = violations
    assert violation.where == f"bound symbol {_cat_index(swapped)} (cat)"
    assert "reads a as f32[2, 3], but a is a parameter of the trace, f32[1, 3]" in violation.message
    error = violation.to_error()
    assert isinstance(error, BrokenTraceError) and error.names == ("a",) and "from_bsym_swap_proxies" in error.fix
    assert (tuple(map(id, swapped.bound_symbols)), frozenset(swapped.names), old.shape, new.shape) == before


def test_another_object_of_the_name_with_the_same_metadata_is_the_same_variable() -> None:
    swapped, old, new = _swap_top_level(_computation(), rows=2)
    assert new is not old and new.name == old.name
    assert trace_findings(swapped) == ([], [])


def test_strict_raises_it_at_the_pass_that_swapped() -> None:
    trace = _computation()
    with stc.audit() as log, installed(STRICT):
        with pytest.raises(BrokenTraceError, match="reads a as f32\\[2, 3\\], but a is a parameter") as info:
            with stc.audited_pass("my sharding pass", inputs=(trace,)) as audited:
                audited.outputs(_swap_top_level(trace, rows=1)[0])
    assert info.value.kind == "stale-proxy-after-swap" and info.value.names == ("a",)
    assert info.value.culprit is not None and info.value.culprit[0] == "my sharding pass"
    assert [v.detail["kind"] for v in log.violations] == ["stale-proxy-after-swap"]


class _ShardInPlace(Transform):
    """#1964's FSDP transform, in small: the computation trace's input ``a`` gets half its rows in place (and the
    prologue checks that shape, as the FSDP transform's does), and the symbols computed for it are carried over as
    they are (nothing swapped)."""

    def transform_traces_pre_prologue(
        self, prologue_trace: TraceCtx, computation_trace: TraceCtx, epilogue_trace: TraceCtx | None, **kwargs: Any
    ) -> tuple[TraceCtx, TraceCtx, TraceCtx | None]:
        for given, a in zip(prologue_trace.output[0], computation_trace.args):
            if a.name == "a":
                a._shape = given._shape = (1, 3)  # in place, as the FSDP transform shards a parameter
                for check in prologue_trace.bound_symbols:
                    if check.sym is prims.check_tensor_shape_and_metadata and check.args[0] is given:
                        check.args = (check.args[0], (1, 3), *check.args[2:])
        new = from_trace(computation_trace)
        new.bound_symbols = [b.from_bsym() for b in computation_trace.bound_symbols]
        return prologue_trace, new, epilogue_trace


def test_a_pass_that_changes_an_input_in_place_under_a_symbol_computed_for_it_is_reported_at_that_pass() -> None:
    jitted = thunder.jit(_concat, transforms=[_ShardInPlace()])
    with stc.audit() as log, installed(STRICT):
        with pytest.raises(BrokenTraceError, match="changed a, an input of the trace, in place from f32\\[2, 3\\] "
                           "to f32\\[1, 3\\], and bound symbol \\d+ \\(cat\\), computed before it") as info:
            jitted(*_inputs())
    assert info.value.kind == "stale-proxy-after-swap" and info.value.names == ("a",)
    assert info.value.culprit is not None and info.value.culprit[0] == "_ShardInPlace.transform_traces_pre_prologue"
    assert [v.detail["kind"] for v in log.violations] == ["stale-proxy-after-swap"]


def test_programs_that_swap_nothing_are_silent_under_strict() -> None:
    jitted = thunder.jit(_concat)
    x, a, b = (t.requires_grad_() for t in _inputs())
    with stc.audit() as log, installed(STRICT):
        actual = jitted(x, a, b)
        actual.sum().backward()
    torch.testing.assert_close(actual, _concat(x, a, b))
    assert log.violations == []


def test_plain_thunder_fails_on_it_and_the_check_takes_an_action_of_its_own() -> None:
    """Plain, the program fails (the prologue wants the shard, the symbols were computed for the whole tensor);
    ``stale_proxy_after_swap="warn"``: the finding is a warning, and Thunder goes on to the same failure."""
    failures = []
    for policy in (None, "warn"):
        jitted = thunder.jit(_concat, transforms=[_ShardInPlace()])
        with pytest.raises(Exception) as info:  # noqa: PT011 - Thunder's own error, whatever it is
            if policy is None:
                jitted(*_inputs())
            else:
                with installed(STRICT), stc.use_policy("strict", stale_proxy_after_swap=policy):
                    with pytest.warns(TraceContextWarning, match="changed a, an input of the trace, in place"):
                        jitted(*_inputs())
        failures.append(type(info.value))
    assert failures[0] is failures[1] and not issubclass(failures[0], BrokenTraceError)
