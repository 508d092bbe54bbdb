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
import torch
from thunder.core.devices import cpu
from thunder.core.dtypes import float32
from thunder.core.proxies import TensorProxy
from thunder.core.symbol import Symbol
from thunder.core.trace import TraceCtx

from safe_tracectx import LENIENT, STRICT, BrokenTraceError, tracectx
from safe_tracectx.hooks import audit, installed
from safe_tracectx.traces.interpreted import unbound_returned_tensors

with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    import thunder
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


def _in_place_on_a_view(x: Any) -> Any:
    y = x * 1.0
    y.view(-1)  # an alias of y: its gradient goes through prims.update_aliases' grad rule
    y.mul_(2)
    return y.sum()


def test_a_trace_input_the_caller_gives_as_none_is_the_callers() -> None:
    """Thunder's VJP hands None as the gradient of an unused output; update_aliases' backward returns it as it is."""
    from thunder.core.transforms import grad

    x = torch.randn(2, 2)
    with audit() as log, installed(STRICT):  # first: Thunder caches the grad rules it makes with the hook in them
        hooked = grad(thunder.jit(_in_place_on_a_view))(x)
    plain = grad(thunder.jit(_in_place_on_a_view))(x)
    torch.testing.assert_close(hooked, plain)
    torch.testing.assert_close(plain[0], torch.full((2, 2), 2.0))
    assert log.to_dict()["violations"] == []


def _outcome(run: Any) -> str:
    try:
        run()
    except Exception as error:  # noqa: BLE001 - the outcome compared is the exception's type
        return type(error).__name__
    return "ok"


def test_under_thunder_jit_the_hook_changes_nothing_thunder_does() -> None:
    """jit(autocast(f)) interprets Thunder's interpret_trace call, and so the hook's own code: what that code read once
    changed Thunder's names, and a program Thunder 0.2.6 fails on ran (a proxy renamed ``tree``)."""
    from thunder.transforms.autocast import autocast

    def forward_and_backward() -> None:
        x, w = torch.randn(4, 3, requires_grad=True), torch.randn(3, 2, requires_grad=True)
        out = thunder.jit(autocast(lambda x, w: (x @ w).relu(), thunder.bfloat16))(x, w)
        out.sum().backward()

    plain = _outcome(forward_and_backward)
    with installed(LENIENT), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        lenient = _outcome(forward_and_backward)
    assert lenient == plain


def test_a_mapped_interpretation_and_a_hook_left_behind_after_uninstall_are_not_watched() -> None:
    from safe_tracectx.hooks import compilation as compilations

    trace, a = _trace(claims_an_output_its_symbol_returns=False)
    with installed(STRICT):
        hook = trace_interpreter.interpret_trace
        compilations.start().add(trace)
        with tracectx(TraceCtx()):  # another function than the symbol runs: its returns are its own
            assert hook(trace, a, symbol_mapper=lambda bsym: bsym.sym) is None  # type: ignore[no-untyped-call]
    assert hook is not trace_interpreter.interpret_trace
    compilations.start().add(trace)  # a grad rule Thunder cached still holds the hook: it only calls Thunder's
    try:
        with tracectx(TraceCtx()):
            assert hook(trace, a) is None  # type: ignore[no-untyped-call]
    finally:
        compilations.end()
