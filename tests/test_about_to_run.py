"""A trace is checked as a program that runs when Thunder runs it as Python, and only then.

``python_callable()`` is the moment a trace's program is made to run; a callable made only as the argument of
``functools.wraps`` (Thunder's autograd.Function lookaside at the end of 2024 took a scratch trace's name this way,
#1221's fix) is read, never run. A callee the program cannot name fails only when the program runs as Python:
``interpret_trace`` evaluates each symbol itself, and a trace a later pass transforms may lose the symbol.
"""

from __future__ import annotations

import functools
import warnings
from typing import Any

import pytest
import torch
from thunder.core import prims
from thunder.core.devices import cpu
from thunder.core.dtypes import float32
from thunder.core.proxies import TensorProxy
from thunder.core.symbol import BoundSymbol, Symbol
from thunder.core.trace import TraceCtx, tracectx
from thunder.core.trace_interpreter import interpret_trace
from thunder.core.transform_common import Transform

import safe_tracectx as stc
from safe_tracectx import STRICT, BrokenTraceError, NameClashError
from safe_tracectx.hooks import installed

with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    import thunder


def _scratch(defect: str) -> TraceCtx:
    """A trace of one input ``a`` whose program has ``defect``: ``twice`` (b defined twice) or ``callee`` (a call
    of ``myneg``, which its call context does not define)."""
    def scratch(a: Any) -> Any:
        return a

    trace = TraceCtx(scratch)
    with tracectx(trace):
        a, b = (TensorProxy(n, shape=(2,), device=cpu, dtype=float32) for n in ("a", "b"))
    trace.args = (a,)
    if defect == "twice":
        trace.bound_symbols += [prims.neg.bind(a, output=b), prims.exp.bind(a, output=b)]
    else:
        myneg = Symbol(name="myneg", meta=None)
        trace.bound_symbols.append(BoundSymbol(myneg, args=(a,), kwargs={}, output=b, _call_ctx={"other": torch.neg}))
    trace.bound_symbols.append(prims.python_return.bind(b, output=None))
    return trace


class MakesACallable(Transform):
    """While the compile runs, makes the callable of a scratch trace: for ``functools.wraps`` only (written in one
    of its usual ways, ``style``), or to run."""

    def __init__(self, defect: str, *, for_wraps: bool, style: str = "decorator") -> None:
        self.defect, self.for_wraps, self.style, self.made = defect, for_wraps, style, False

    def transform_traces_pre_prologue(
        self, prologue_trace: TraceCtx, computation_trace: TraceCtx, epilogue_trace: TraceCtx | None, **kwargs: Any
    ) -> Any:
        scratch = _scratch(self.defect)

        def interface(*args: Any) -> Any:
            return args

        if self.for_wraps and self.style == "decorator":
            @functools.wraps(scratch.python_callable())
            def interface(*args: Any) -> Any:
                return args
        elif self.for_wraps and self.style == "decorator over lines":
            @functools.wraps(
                scratch.python_callable()
            )
            def interface(*args: Any) -> Any:
                return args
        elif self.for_wraps and self.style == "keyword":
            interface = functools.wraps(wrapped=scratch.python_callable())(interface)
        elif self.for_wraps and self.style == "update_wrapper":
            functools.update_wrapper(interface, scratch.python_callable())
        if self.for_wraps:
            assert interface.__name__ == "scratch"
        else:
            scratch.python_callable()
        self.made = True
        return prologue_trace, computation_trace, epilogue_trace


def _compile(transform: MakesACallable) -> torch.Tensor:
    result: torch.Tensor = thunder.jit(lambda x: x.sin(), transforms=[transform])(torch.ones(2))
    assert transform.made
    return result


@pytest.mark.parametrize("style", ["decorator", "decorator over lines", "keyword", "update_wrapper"])
@pytest.mark.parametrize("defect", ["twice", "callee"])
def test_a_callable_made_for_wraps_is_read_not_run_and_not_checked(defect: str, style: str) -> None:
    transform = MakesACallable(defect, for_wraps=True, style=style)
    with stc.audit() as log, installed(STRICT):
        result = _compile(transform)
    assert log.violations == []
    torch.testing.assert_close(result, torch.ones(2).sin())


@pytest.mark.parametrize(("defect", "error", "kind"), [
    ("twice", NameClashError, "defined-twice"), ("callee", BrokenTraceError, "generated-code"),
])
def test_the_same_callable_made_to_run_is_checked_and_strict_raises(defect: str, error: type[Exception], kind: str) -> None:
    with installed(STRICT), pytest.raises(error) as info:
        _compile(MakesACallable(defect, for_wraps=False))
    assert getattr(info.value, "kind") == kind and "the trace about to run" in str(info.value)
    assert "MakesACallable.transform_traces_pre_prologue" in str(info.value)


class InterpretsACallee(Transform):
    """Evaluates a trace holding a symbol its program cannot call by name with ``interpret_trace``, which maps each
    symbol itself (as the VJP does), and keeps what it computed."""

    def __init__(self) -> None:
        self.value: Any = None

    def transform_traces_pre_prologue(
        self, prologue_trace: TraceCtx, computation_trace: TraceCtx, epilogue_trace: TraceCtx | None, **kwargs: Any
    ) -> Any:
        scratch = _scratch("callee")
        evaluate: Any = interpret_trace
        self.value = evaluate(scratch, torch.full((2,), 2.0), symbol_mapper=lambda bsym: torch.neg)
        return prologue_trace, computation_trace, epilogue_trace


def test_an_interpreted_trace_has_no_callee_to_name() -> None:
    transform = InterpretsACallee()
    with stc.audit() as log, installed(STRICT):
        thunder.jit(lambda x: x.cos(), transforms=[transform])(torch.ones(2))
    assert log.violations == []
    torch.testing.assert_close(transform.value, torch.full((2,), -2.0))


def test_a_jitted_function_evaluating_a_trace_is_traced_through_thunders_evaluation_not_the_check() -> None:
    """Thunder's test_eval_trace: ``thunder.jit`` of a function that calls ``eval_trace`` traces through it. The
    check run before the evaluation must be opaque to Thunder's interpreter (it failed with IndexError inside it)."""
    def foo(a: Any, b: Any, *, c: float = 5.0) -> Any:
        return (a + b) * c

    a, b = torch.randn(2, 2), torch.randn(2, 2)
    trace = thunder.trace()(foo, a, b, c=4.0)
    with stc.audit() as log, installed(STRICT):
        import thunder.core.transforms as transforms

        eval_trace: Any = getattr(transforms, "eval_trace")  # read while installed (an import in the test): the hook

        def evaluate(*args: Any, **kwargs: Any) -> Any:
            return eval_trace(trace, *args, **kwargs)

        assert eval_trace is not getattr(eval_trace, "__wrapped__", eval_trace)
        got = thunder.jit(evaluate)(a, b, c=4.0)
    assert log.violations == []
    torch.testing.assert_close(got, (a + b) * 4.0)


class AppendsNeg(Transform):
    """After the executors were chosen, appends a negation of the last tensor: as Thunder's own ``prims.neg`` (which
    no executor then implements), or as the torch executor's operator."""

    def __init__(self, *, executors_symbol: bool) -> None:
        self.executors_symbol = executors_symbol

    def transform_trace_post_optimization(self, computation_trace: TraceCtx, **kwargs: Any) -> Any:
        from thunder.core.trace import from_trace
        from thunder.executors.torchex import ex as torch_executor

        new = from_trace(computation_trace)
        *body, ret = computation_trace.bound_symbols
        last = [b for b in body if isinstance(b.output, TensorProxy)][-1].output
        with tracectx(new):
            negated = TensorProxy(like=last)
        symbol = torch_executor.implmap[prims.neg.id].symbol if self.executors_symbol else prims.neg
        assert symbol is not None
        new.bound_symbols = [*body, symbol.bind(last, output=negated), ret]
        return new


def test_a_thunder_symbol_left_in_the_program_about_to_run_is_refused_before_it_fails_and_charged_to_its_pass() -> None:
    """Found by helper 53: Thunder's NotImplementedError was reported as a symbol called with no trace active,
    whose fix (make a trace active) is not this one's; the program calls Thunder's symbol itself."""
    jitted = thunder.jit(lambda x: x * 2, transforms=[AppendsNeg(executors_symbol=False)])
    with pytest.raises(NotImplementedError, match="outside of a tracing context"):
        jitted(torch.ones(2))  # plain Thunder: the program fails
    jitted = thunder.jit(lambda x: x * 2, transforms=[AppendsNeg(executors_symbol=False)])
    with installed(), stc.use_policy(STRICT), pytest.raises(BrokenTraceError) as caught:
        jitted(torch.ones(2))
    message = str(caught.value)
    assert "is printed as a call of prims.neg, Thunder's symbol itself" in message
    assert "it first appears in the trace made by AppendsNeg.transform_trace_post_optimization" in message
    assert "binds an executor's operator" in caught.value.fix


def test_the_executors_operator_in_its_place_runs_and_is_not_reported() -> None:
    jitted = thunder.jit(lambda x: x * 2, transforms=[AppendsNeg(executors_symbol=True)])
    with installed(), stc.use_policy(STRICT):
        assert torch.equal(jitted(torch.ones(2)), torch.full((2,), 2.0))
