"""A symbol called while no trace is active: strict says which proxies and which code, before Thunder's bare error.

Thunder's ``Symbol.__call__`` raises ``NotImplementedError("Attempting to execute
symbol numel outside of a tracing context ...")``; a pass that reads ``x.numel`` of
a proxy under symbolic values did so in Thunder's alias-update pass (#2760). The
hook replaces ``get_tracectx`` in ``thunder.core.symbol`` alone.
"""

from __future__ import annotations

import warnings
from typing import Any

import pytest
import torch
from thunder.core.devices import cpu
from thunder.core.dtypes import float32
from thunder.core.proxies import TensorProxy
from thunder.core.trace import TraceCtx, get_tracectx
from thunder.core.transform_common import Transform

from safe_tracectx import LENIENT, STRICT, MissingTraceError, TraceContextWarning, tracectx, use_policy
from safe_tracectx.errors import SymbolOutsideTraceError
from safe_tracectx.policy import AUDIT
from safe_tracectx.hooks import audit, installed

with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    import thunder
    import thunder.core.symbol as thunder_symbol
    import thunder.core.trace as thunder_trace
    import thunder.torch as ltorch

THUNDERS_WORDS = "Attempting to execute symbol exp outside of a tracing context, which is not supported"


def _proxy(name: str) -> TensorProxy:
    with tracectx(TraceCtx()):
        return TensorProxy(name, shape=(2,), device=cpu, dtype=float32)


def call_exp_outside_a_trace(x: TensorProxy) -> Any:
    return ltorch.exp(x)


def test_strict_raises_thunders_error_with_the_proxies_and_the_caller() -> None:
    x = _proxy("x")
    with installed(STRICT), pytest.raises(SymbolOutsideTraceError, match=THUNDERS_WORDS) as info:
        call_exp_outside_a_trace(x)
    error = info.value
    assert isinstance(error, NotImplementedError) and isinstance(error, MissingTraceError)
    assert error.kind == "symbol-outside-trace" and error.names == ("x",)
    assert error.culprit == ("call_exp_outside_a_trace", f"{__name__}.call_exp_outside_a_trace")
    assert f"{__name__}.call_exp_outside_a_trace called it on x" in error.message
    assert "with tracectx(trace)" in error.fix
    assert get_tracectx() is None  # the trace state is as it was


def test_code_that_catches_thunders_error_still_catches_it() -> None:
    x = _proxy("x")
    with installed(STRICT):
        try:
            call_exp_outside_a_trace(x)
        except NotImplementedError as caught:
            assert str(caught).startswith(THUNDERS_WORDS)
        else:
            pytest.fail("no error")


@pytest.mark.parametrize("policy", [AUDIT, LENIENT], ids=["audit", "lenient"])
def test_the_non_raising_policies_record_it_and_thunder_raises_its_own(policy: Any) -> None:
    x, y = _proxy("x"), _proxy("y")
    thunders = THUNDERS_WORDS.replace("exp", "add")
    with audit() as log, use_policy(policy), warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        with pytest.raises(NotImplementedError, match=thunders) as info:
            ltorch.add(x, y)
    assert not isinstance(info.value, SymbolOutsideTraceError)
    (violation,) = log.to_dict()["violations"]
    assert violation["kind"] == "symbol-outside-trace" and violation["names"] == ["x", "y"]
    # lenient's "traceless" cannot run a symbol: it warns
    assert violation["error"] == "SymbolOutsideTraceError" and violation["action"] == ("ignore" if policy is AUDIT
                                                                                        else "warn")
    said = [w for w in seen if issubclass(w.category, TraceContextWarning)]
    assert [str(w.message).startswith(thunders) for w in said] == ([] if policy is AUDIT else [True])


def test_a_call_with_a_trace_active_is_left_alone() -> None:
    x = _proxy("x")
    trace = TraceCtx()
    with audit() as log, installed(STRICT), tracectx(trace):
        out = ltorch.exp(x)
    assert out.name in trace.names and not log.to_dict()["violations"]


def test_only_the_symbol_module_gets_the_hook_and_uninstall_puts_thunders_back() -> None:
    original = thunder_symbol.get_tracectx
    assert original is thunder_trace.get_tracectx
    with installed(STRICT):
        assert thunder_symbol.get_tracectx is not original
        assert thunder_symbol.get_tracectx.__wrapped__ is original  # type: ignore[attr-defined]
        assert thunder_trace.get_tracectx is original  # Thunder's hot path elsewhere is untouched
        assert thunder_symbol.get_tracectx() is None  # not from Symbol.__call__: no report
    assert thunder_symbol.get_tracectx is original


class ReadsAnExpOutsideTheTrace(Transform):
    """A user's transform with the #2760 slip: it computes a symbol of an input proxy with no trace active."""

    def transform_traces_pre_prologue(
        self, prologue_trace: TraceCtx, computation_trace: TraceCtx, epilogue_trace: TraceCtx | None, **kwargs: Any
    ) -> tuple[TraceCtx, TraceCtx, TraceCtx | None]:
        ltorch.exp(computation_trace.args[0])
        return prologue_trace, computation_trace, epilogue_trace


def _add_one(a: torch.Tensor) -> torch.Tensor:
    return a + 1


def test_a_transform_that_calls_a_symbol_outside_its_trace_is_named_in_a_real_jit() -> None:
    jitted = thunder.jit(_add_one, transforms=[ReadsAnExpOutsideTheTrace()])
    with pytest.raises(NotImplementedError, match=THUNDERS_WORDS):
        jitted(torch.randn(2))  # plain Thunder: its own error, no names
    jitted = thunder.jit(_add_one, transforms=[ReadsAnExpOutsideTheTrace()])
    with installed(STRICT), pytest.raises(SymbolOutsideTraceError, match=THUNDERS_WORDS) as info:
        jitted(torch.randn(2))
    assert info.value.names == ("a",)
    assert info.value.culprit is not None
    assert info.value.culprit[1] == f"{__name__}.ReadsAnExpOutsideTheTrace.transform_traces_pre_prologue"
    assert "while" in info.value.message  # the running pass is named
