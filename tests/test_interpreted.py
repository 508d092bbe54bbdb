"""A trace evaluated symbol by symbol that returns None where it says a tensor (#2397's class).

``interpret_trace`` binds each bound symbol's outputs to what calling its symbol
returned; a bound symbol that names an output its symbol does not return binds
that name to None. Installed, the interpreter hook asks ``interpret_trace`` for
its environment and reports a returned tensor bound to None before the caller
reads it.
"""

from __future__ import annotations

import warnings
from typing import Any

import pytest
from thunder.core.devices import cpu
from thunder.core.dtypes import float32
from thunder.core.proxies import TensorProxy
from thunder.core.symbol import Symbol
from thunder.core.trace import TraceCtx

from safe_tracectx import STRICT, BrokenTraceError, tracectx
from safe_tracectx.hooks import audit, installed
from safe_tracectx.traces.interpreted import unbound_returned_tensors

with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    import thunder.core.prims as prims
    import thunder.core.trace_interpreter as trace_interpreter


def _returns_nothing_meta(a: TensorProxy) -> None:
    return None


#: An in-place-like symbol that returns None, as ltorch.setitem_ did before #2397's fix.
update_in_place = Symbol(name="update_in_place", meta=_returns_nothing_meta, id="tests.update_in_place")


def _trace(*, claims_an_output_its_symbol_returns: bool) -> tuple[TraceCtx, TensorProxy]:
    """``t5 = update_in_place(a); return t5`` (or ``t5 = neg(a)``, which does return t5)."""
    trace = TraceCtx()
    with tracectx(trace):
        a = TensorProxy("a", shape=(2,), device=cpu, dtype=float32)
        t5 = TensorProxy("t5", shape=(2,), device=cpu, dtype=float32)
    symbol = prims.neg if claims_an_output_its_symbol_returns else update_in_place
    trace.args = (a,)
    trace.bound_symbols = [symbol.bind(a, output=t5), prims.python_return.bind(t5, output=None)]
    return trace, a


def _interpret(trace: TraceCtx, a: TensorProxy, **kwargs: Any) -> Any:
    with tracectx(TraceCtx()):  # the symbols record into a trace of their own, as a grad transform's do
        return trace_interpreter.interpret_trace(trace, a, **kwargs)  # type: ignore[no-untyped-call]


def test_a_returned_tensor_bound_to_none_is_named_with_the_bound_symbol_that_claims_it() -> None:
    trace, _ = _trace(claims_an_output_its_symbol_returns=False)
    (violation,) = unbound_returned_tensors(trace, {"a": object(), "t5": None})
    assert violation.kind == "unreturned-output" and violation.name == "t5"
    assert "bound symbol 0 (update_in_place) names t5 as its output, but calling update_in_place returned None" in (
        violation.message
    )
    assert unbound_returned_tensors(trace, {"t5": object()}) == []  # bound to a value
    assert unbound_returned_tensors(trace, {}) == []  # never bound (the caller's KeyError is Thunder's own)


def test_strict_reports_it_when_the_interpretation_returns_before_the_caller_reads_it() -> None:
    from safe_tracectx.hooks import compilation as compilations

    trace, a = _trace(claims_an_output_its_symbol_returns=False)
    assert _interpret(trace, a) is None  # plain Thunder: None where the trace says a tensor, silently
    with audit() as log, installed(STRICT), pytest.raises(BrokenTraceError) as info:
        compilations.start().add(trace)
        _interpret(trace, a)
    assert info.value.kind == "unreturned-output" and info.value.names == ("t5",)
    assert "interpreting trace" in str(info.value) and "returned None for it" in str(info.value)
    assert info.value.culprit is not None
    (violation,) = log.to_dict()["violations"]
    assert violation["kind"] == "unreturned-output" and violation["action"] == "raise"


@pytest.mark.parametrize("with_env", [False, True])
def test_the_hook_returns_what_the_caller_asked_for(with_env: bool) -> None:
    from safe_tracectx.hooks import compilation as compilations

    trace, a = _trace(claims_an_output_its_symbol_returns=True)
    plain = _interpret(trace, a, with_env=with_env)
    with audit() as log, installed(STRICT):
        compilations.start().add(trace)
        hooked = _interpret(trace, a, with_env=with_env)
    assert type(hooked) is type(plain)
    if with_env:
        assert isinstance(hooked, tuple) and set(hooked[1]) == set(plain[1]) == {"a", "t5"}
    else:
        assert isinstance(hooked, TensorProxy)
    assert not log.to_dict()["violations"]
