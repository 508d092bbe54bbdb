"""A trace Thunder cannot print (#1544's class): a bound symbol whose contexts cannot be gathered.

Thunder prints a trace (``str(trace)``, ``trace.python()``, and to run it) by
gathering each bound symbol's import, call and object contexts; a symbol with no
module, no call context and no executor that prints it makes
``BoundSymbol.import_ctx`` fail, and with it the whole trace. The check gathers
as Thunder does, on a copy, with no trace active, and charges the finding to the
function of Thunder's that raised.
"""

from __future__ import annotations

import gc
import warnings
import weakref
from typing import Any

import pytest
import torch
from thunder.core import prims
from thunder.core.devices import cpu
from thunder.core.dtypes import float32
from thunder.core.proxies import TensorProxy
from thunder.core.symbol import BoundSymbol, Symbol
from thunder.core.trace import TraceCtx, from_trace
from thunder.core.transform_common import Transform
from thunder.extend import OperatorExecutor, StatefulExecutor

from safe_tracectx import BrokenTraceError, STRICT, tracectx
from safe_tracectx.hooks import installed
from safe_tracectx.traces.checks import check_trace, trace_findings
from safe_tracectx.traces.printing import PrintedSymbols, print_problem
from custom_functions import Scaled

with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    import thunder


def _unprintable(name: str = "mystery") -> Symbol:
    """A symbol Thunder's printer cannot import: no meta (so no module), no call context, no ad hoc executor."""
    return Symbol(name=name, meta=None)


def _trace_with(symbol: Symbol, *, used: bool) -> tuple[TraceCtx, TensorProxy]:
    trace = TraceCtx()
    with tracectx(trace):
        a, b, c = (TensorProxy(n, shape=(2,), device=cpu, dtype=float32) for n in ("a", "b", "c"))
    trace.args = (a,)
    trace.bound_symbols += [
        BoundSymbol(symbol, args=(a, object()), kwargs={}, output=b),
        prims.neg.bind(a, output=c),
        prims.python_return.bind(b if used else c, output=None),
    ]
    return trace, b


def _state(trace: TraceCtx) -> tuple[object, ...]:
    return (
        tuple(trace.names), trace.name_ctr, dict(trace._object_ctx), tuple(map(id, trace.bound_symbols)),
        [(dict(b._import_ctx), dict(b._object_ctx), sorted(b.__dict__)) for b in trace.bound_symbols],
    )


def test_a_symbol_thunder_cannot_print_is_reported_with_thunder_s_failing_function() -> None:
    trace, b = _trace_with(_unprintable(), used=True)
    before = _state(trace)
    (violation,) = [v for v in check_trace(trace) if v.kind == "generated-code"]
    assert _state(trace) == before  # gathered on a copy: the bound symbol's cached contexts are as they were
    assert violation.name == "b" and violation.where == "bound symbol 0 (mystery)"
    assert "the trace cannot be printed" in violation.message
    assert "raises AssertionError in BoundSymbol.import_ctx (thunder/core/symbol.py:" in violation.message
    assert violation.culprit == ("BoundSymbol.import_ctx", "thunder.core.symbol.BoundSymbol.import_ctx")
    assert "BoundSymbol.import_ctx failed" in violation.fix
    assert isinstance(violation.to_error(), BrokenTraceError)
    with pytest.raises(AssertionError):  # what the check foresaw: Thunder's own printer fails on this trace
        str(trace)


def test_unprintable_dead_code_is_a_note() -> None:
    trace, _ = _trace_with(_unprintable("mystery_dead"), used=False)
    violations, notes = trace_findings(trace)
    assert [v.kind for v in violations] == []
    assert [(v.kind, v.name) for v in notes] == [("generated-code", "b")]


def test_every_trace_of_a_real_compile_prints_and_is_left_unchanged() -> None:
    # Scaled is an ad hoc executor's symbol with no module (#1544's program)
    jf = thunder.jit(lambda x: Scaled.apply(x) * 3)  # type: ignore[no-untyped-call]
    jf(torch.randn(2, requires_grad=True)).sum().backward()
    traces = [*thunder.last_traces(jf), *thunder.last_backward_traces(jf)]
    for trace in traces:
        assert all(print_problem(b) is None for b in trace.bound_symbols)
        assert [v for v in check_trace(trace) if v.kind == "generated-code"] == []
        str(trace)


def test_printing_under_an_active_trace_names_nothing_in_it() -> None:
    trace, _ = _trace_with(Symbol(name="uses_an_object", meta=None, _module=torch), used=True)
    active = TraceCtx()
    before = (dict(active._object_ctx), tuple(active.names), active.name_ctr)
    with tracectx(active):
        assert print_problem(trace.bound_symbols[0]) is None
    assert (dict(active._object_ctx), tuple(active.names), active.name_ctr) == before


class UnprintableTransform(Transform):
    """Replaces ``2 * c``'s symbol by one without a module: Thunder then cannot print the trace it returns."""

    def transform_traces_pre_prologue(
        self, prologue_trace: TraceCtx, computation_trace: TraceCtx, epilogue_trace: TraceCtx | None, **kwargs: Any
    ) -> tuple[TraceCtx, TraceCtx, TraceCtx | None]:
        new = from_trace(computation_trace)
        new.bound_symbols = [
            b.from_bsym(sym=_unprintable("mystery_mul")) if b.sym.name == "mul" else b
            for b in computation_trace.bound_symbols
        ]
        return prologue_trace, new, epilogue_trace


def test_strict_stops_at_the_pass_that_returned_an_unprintable_trace() -> None:
    def fn(a: torch.Tensor) -> torch.Tensor:
        return 2 * (a + 1)

    with installed(STRICT), pytest.raises(BrokenTraceError) as caught:
        thunder.jit(fn, transforms=[UnprintableTransform()])(torch.randn(2))
    message = str(caught.value)
    assert "UnprintableTransform.transform_traces_pre_prologue" in message and "cannot be printed" in message
    assert "mystery_mul" in message and "BoundSymbol.import_ctx" in message
    assert caught.value.kind == "generated-code"
    assert caught.value.culprit == ("BoundSymbol.import_ctx", "thunder.core.symbol.BoundSymbol.import_ctx")


def test_a_subsymbol_thunder_cannot_print_fails_str_only_and_is_said_so() -> None:
    """``str(trace)`` prints subsymbols as comments, ``trace.python()`` only the top level."""
    ex = OperatorExecutor("stc_printing_sub_ex", version="0.1")
    inner = ex.register_operator("inner", meta=lambda x, a: TensorProxy(like=x), fn=lambda x, a: x + len(a))

    def outer_like(x: Any) -> Any:
        return inner(x, frozenset({1}))

    # ``like`` takes a function too (its meta and name; then its calls are recorded as subsymbols), though
    # Thunder's annotation says Symbol | None
    outer = ex.register_operator("outer", like=outer_like, fn=lambda x: x + 1)  # type: ignore[arg-type]
    ex.register_implementation(outer, outer)
    jf = thunder.jit(lambda x: outer(x), executors=[ex])
    with installed(STRICT), pytest.raises(BrokenTraceError) as caught:
        jf(torch.zeros(2))
    assert "printing bound symbol 1 (outer)" in str(caught.value)
    assert "TypeError in tree_flatten" in str(caught.value) and "frozenset" in str(caught.value)
    assert "str(trace) fails (in the commented lines of its subsymbols" in str(caught.value)
    jf(torch.zeros(2))  # plain: it runs, and str() of its first trace fails as the report said
    first = thunder.last_traces(jf)[0]
    first.python()
    with pytest.raises(TypeError):
        str(first)


def test_a_symbol_that_printed_once_is_printed_again_with_arguments_beyond_plain_values() -> None:
    symbol = Symbol(name="takes_anything", meta=None, _module=torch)
    trace = TraceCtx()
    with tracectx(trace):
        a, b, c = (TensorProxy(n, shape=(2,), device=cpu, dtype=float32) for n in ("a", "b", "c"))
    trace.args = (a,)
    trace.bound_symbols += [
        BoundSymbol(symbol, args=(a, (1, 2.0, "s", None, float32, cpu, slice(1))), kwargs={}, output=b),
        BoundSymbol(symbol, args=(b, frozenset({1})), kwargs={}, output=c),
        prims.python_return.bind(c, output=None),
    ]
    assert [(v.kind, v.name) for v in check_trace(trace)] == [("generated-code", "c")]
    printed = PrintedSymbols()
    assert printed.needs_printing(trace.bound_symbols[0])
    printed.add(trace.bound_symbols[0])
    assert not printed.needs_printing(trace.bound_symbols[0])  # the same symbol with plain arguments
    assert printed.needs_printing(trace.bound_symbols[1])  # a frozenset: printed again


def test_printing_holds_no_reference_to_the_symbols_it_printed() -> None:
    def meta(x: Any) -> Any:
        return TensorProxy(like=x)

    symbol = Symbol(name="short_lived", meta=meta, _module=torch)
    gone = weakref.ref(meta)
    trace, _ = _trace_with(symbol, used=True)
    assert [v for v in check_trace(trace) if v.kind == "generated-code"] == []
    del symbol, trace, meta
    gc.collect()
    assert gone() is None


def test_printing_runs_no_binding_step_of_a_stateful_executor() -> None:
    """A stateful operator binds a new state object per bound symbol; printing a copy must not make one."""
    ex = StatefulExecutor("stc_printing_state_ex", version="0.1")
    made: list[object] = []

    class State:
        def __init__(self) -> None:
            made.append(self)

        def __call__(self, x: torch.Tensor) -> torch.Tensor:
            return x + 1

    op = ex.register_stateful_operator("op", State, meta=lambda x: TensorProxy(like=x))
    jf = thunder.jit(lambda x: op(x), executors=[ex])
    jf(torch.zeros(2))
    plain = len(made)
    made.clear()
    jf = thunder.jit(lambda x: op(x), executors=[ex])
    with installed(STRICT):
        assert torch.equal(jf(torch.zeros(2)), torch.ones(2))
    assert len(made) == plain


def test_a_second_call_of_a_printed_symbol_whose_subsymbols_do_not_print_is_reported() -> None:
    """outer(x, 1) prints; outer(x, 2), with the same kind of arguments, decomposes into a call Thunder cannot
    print: whether a bound symbol prints depends on its subsymbols too, whatever the order of the calls."""
    ex = OperatorExecutor("stc_printing_order_ex", version="0.1")
    inner = ex.register_operator("inner", meta=lambda x, a: TensorProxy(like=x), fn=lambda x, a: x + len(a))

    def outer_like(x: Any, n: int) -> Any:
        return inner(x, (n,) if n == 1 else frozenset({n}))

    outer = ex.register_operator("outer", like=outer_like, fn=lambda x, n: x + 1)  # type: ignore[arg-type]
    ex.register_implementation(outer, outer)
    jf = thunder.jit(lambda x: outer(x, 1) + outer(x, 2), executors=[ex])
    with installed(STRICT), pytest.raises(BrokenTraceError) as caught:
        jf(torch.zeros(2))
    assert "printing bound symbol 2 (outer)" in str(caught.value) and "frozenset" in str(caught.value)
