"""A symbol called while no trace is active: strict says which proxies and which code, before Thunder's bare error.

Thunder's ``Symbol.__call__`` raises ``NotImplementedError("Attempting to execute
symbol numel outside of a tracing context ...")``; a pass that reads ``x.numel`` of
a proxy under symbolic values did so in Thunder's alias-update pass (#2760). The
hook replaces ``get_tracectx`` in ``thunder.core.symbol`` alone.
"""

from __future__ import annotations

import sys
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


def add_outside_a_trace(x: TensorProxy, y: TensorProxy) -> Any:
    return x + y  # through TensorProxy.__add__, the language context and Thunder's DTensor-aware dispatch wrapper


def test_an_operator_on_proxies_is_charged_to_the_code_that_used_it() -> None:
    x, y = _proxy("x"), _proxy("y")
    with installed(STRICT), pytest.raises(SymbolOutsideTraceError) as info:
        add_outside_a_trace(x, y)
    assert info.value.names == ("x", "y")
    assert info.value.culprit == ("add_outside_a_trace", f"{__name__}.add_outside_a_trace")


def test_the_names_are_the_proxies_given_at_any_depth_and_none_without_proxies() -> None:
    x = _proxy("x")
    nested: Any = x
    for _ in range(5000):  # deeper than a recursive flatten goes
        nested = [nested]
    with installed(STRICT):
        with pytest.raises(SymbolOutsideTraceError) as deep:
            ltorch.exp(nested)
        with pytest.raises(SymbolOutsideTraceError) as plain_number:
            ltorch.exp(2.0)
    assert deep.value.names == ("x",)
    assert plain_number.value.names == () and "with no proxy arguments" in plain_number.value.message


class _NamelessProxy(TensorProxy):
    @property
    def name(self) -> str:  # a hostile proxy: reading its name fails
        raise RuntimeError("no name")


def test_a_report_that_cannot_be_built_leaves_thunders_error_as_it_is() -> None:
    with tracectx(TraceCtx()):
        hostile = _NamelessProxy(like=_proxy("x"))
    with installed(STRICT), warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        with pytest.raises(NotImplementedError, match=THUNDERS_WORDS) as info:
            ltorch.exp(hostile)
    assert type(info.value) is NotImplementedError
    assert any("could not check a symbol called with no trace active" in str(w.message) for w in seen)


def test_another_librarys_get_tracectx_in_thunders_place_is_still_called() -> None:
    original = thunder_symbol.get_tracectx
    calls = []

    def counting() -> Any:
        calls.append(1)
        return original()

    thunder_symbol.get_tracectx = counting
    try:
        with installed(STRICT):
            assert thunder_symbol.get_tracectx is not counting
            with tracectx(TraceCtx()):
                ltorch.exp(_proxy("x"))
            assert calls
        assert thunder_symbol.get_tracectx is counting
    finally:
        thunder_symbol.get_tracectx = original


def test_a_module_that_took_the_hook_while_installed_gets_thunders_back() -> None:
    import types

    late = types.ModuleType("late_importer")
    with installed(STRICT):
        exec("from thunder.core.symbol import get_tracectx", late.__dict__)
        sys.modules["late_importer"] = late
        assert late.get_tracectx is thunder_symbol.get_tracectx
    try:
        assert late.get_tracectx is thunder_trace.get_tracectx
    finally:
        del sys.modules["late_importer"]
