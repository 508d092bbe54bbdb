"""output-wrong-value: the program about to run returns other values than the trace the interpretation made.

Eager PyTorch is the oracle: each reported program is first run by plain Thunder, whose
result must differ from eager's (so a Thunder that fixed the bug fails these tests loudly
rather than leaving the check untested), and each working program must give eager's
result. Two bugs are made with an executor of the test's own; one is Thunder's
(docs/findings.md 26): ``glu`` under torch.compile's executor returns ones.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from typing import Any

import pytest
import torch
import torch.nn.functional as F

from safe_tracectx import STRICT, BrokenTraceError, use_policy
from safe_tracectx.hooks import audit, installed
from safe_tracectx.hooks.eager_reference import METADATA
from safe_tracectx.hooks.output_replay import KIND
from safe_tracectx.traces.returns import handed_to_caller
from safe_tracectx.policy import AUDIT

with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    import thunder
    import thunder.core.jit_ext as jit_ext
    import thunder.torch as ltorch
    from thunder.core.langctxs import Languages, langctx
    from thunder.core.proxies import TensorProxy
    from thunder.core.symbol import Symbol
    from thunder.executors.torch_compile import torch_compile_ex
    from thunder.extend import OperatorExecutor

T = torch.Tensor


def _wrong_executor(name: str, symbol: Any, fn: Callable[..., T]) -> OperatorExecutor:
    executor = OperatorExecutor(name, version="1")
    operator = executor.register_operator(name, like=symbol, fn=fn)
    executor.register_implementation(symbol, operator)
    return executor


#: sin run as cos: wrong everywhere.
COSINE = _wrong_executor("test_sin_as_cos", ltorch.sin, torch.cos)
#: sin right for small values only: wrong only where the call's own values go, never at randn's.
SMALL_ONLY = _wrong_executor("test_sin_small_only", ltorch.sin, lambda x: torch.where(x.abs() > 50, 0.0, torch.sin(x)))


def _ours(log: Any) -> list[Any]:
    return [v for v in log.to_dict()["violations"] if v["kind"] == KIND]


def _sine(x: T) -> T:
    return x.sin() * 2


def test_an_executor_that_computes_another_value_is_refused_before_the_program_runs() -> None:
    jitted = thunder.jit(_sine, executors=[COSINE, *thunder.get_default_executors()])
    x = torch.randn(5)
    assert not torch.allclose(jitted(x), _sine(x)), "the wrong executor no longer changes the value"
    before, state = x.clone(), torch.random.get_rng_state()
    with installed(), use_policy(STRICT), pytest.raises(BrokenTraceError) as raised:
        thunder.jit(_sine, executors=[COSINE, *thunder.get_default_executors()])(x)
    error = raised.value
    assert error.kind == KIND
    assert "returns another" in str(error) and "than the trace the interpretation made" in str(error)
    assert error.culprit is not None and "_transform_for_operator_executor_execution" in error.culprit[1]
    assert "executor" in error.fix
    assert torch.equal(x, before) and x.grad is None and not x.requires_grad
    assert torch.equal(torch.random.get_rng_state(), state)


def test_a_value_wrong_only_at_the_calls_own_inputs_is_reported() -> None:
    executors = [SMALL_ONLY, *thunder.get_default_executors()]
    x = torch.full((4,), 100.0)
    assert not torch.allclose(thunder.jit(_sine, executors=executors)(x), _sine(x))
    r = torch.randn(4)
    assert torch.allclose(thunder.jit(_sine, executors=executors)(r), _sine(r))  # random values never reach 50
    with audit() as log, use_policy(AUDIT):
        thunder.jit(_sine, executors=executors)(x)
    assert len(_ours(log)) == 1


def _glu(x: T) -> T:
    return F.glu(x, 0)


def test_thunders_glu_under_torch_compiles_executor_is_refused() -> None:
    """docs/findings.md 26: torch.compile's executor re-executes the region without the names of the symbols nested
    in glu's sigmoid, so new proxies take them and the region computes (1 + e^-b) / (1 + e^-b)."""
    x = torch.randn(2, 7)
    assert torch.allclose(thunder.jit(_glu, executors=[torch_compile_ex])(x), torch.ones(1, 7)), "Thunder fixed glu"
    with installed(), use_policy(STRICT), pytest.raises(BrokenTraceError) as raised:
        thunder.jit(_glu, executors=[torch_compile_ex])(x)
    assert raised.value.kind == KIND
    assert raised.value.culprit is not None and "TorchCompileExecutor.fusion_pass" in raised.value.culprit[1]


def _divert(monkeypatch: pytest.MonkeyPatch, function: Callable[..., Any], symbol: Symbol) -> None:
    """``function`` traced as ``symbol``, wrapped as Thunder wraps the lookasides of its torch symbols."""
    wrapped = jit_ext.record_source_loc_in_symbol_header(symbol)  # type: ignore[no-untyped-call]
    lookaside = jit_ext.ensure_recursive_proxies(jit_ext.interpreter_needs_wrap(wrapped))  # type: ignore[no-untyped-call,attr-defined]
    monkeypatch.setitem(jit_ext._general_jit_lookaside_map, function, lookaside)


@langctx(Languages.TORCH)
def _abs_recorded_transposed(a: TensorProxy) -> TensorProxy:
    return TensorProxy(like=a, shape=tuple(reversed(a.shape)))


@langctx(Languages.TORCH)
def _square_as_doubling(a: TensorProxy) -> Any:
    return ltorch.mul(a, 2)


def _rows(x: T) -> T:
    y = torch.abs(x)
    return y.reshape(y.shape[0], -1)


def test_a_meta_that_records_another_shape_than_eager_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    """The #2258 and #1970 class: the torch executor runs torch.abs ((3, 5)) where the trace says (5, 3), so the
    reshape after it, traced for the recorded shape, gives the call another shape than eager's."""
    _divert(monkeypatch, torch.abs, Symbol(name="abs", meta=_abs_recorded_transposed, id="torch.abs", is_prim=False))
    x = torch.randn(3, 5)
    assert thunder.jit(_rows)(x).shape == (5, 3) != _rows(x).shape
    with installed(), use_policy(STRICT), pytest.raises(BrokenTraceError) as raised:
        thunder.jit(_rows)(x)
    error = raised.value
    assert error.kind == METADATA
    assert "records y as float32[5, 3], but eager PyTorch's torch.abs gives float32[3, 5]" in str(error)
    assert error.culprit is not None and error.culprit[0] == "_abs_recorded_transposed"
    assert "meta compute the shape and dtype" in error.fix


def test_a_decomposition_that_computes_another_value_is_charged_to_its_symbol(monkeypatch: pytest.MonkeyPatch) -> None:
    """The #2614 and #1751 class: the interpretation's own trace computes it otherwise than eager's op (here a
    square decomposed as a doubling, which the torch executor runs as it is): charged to the symbol, not a pass."""
    _divert(monkeypatch, torch.square, Symbol(name="square", meta=_square_as_doubling, id="torch.square", is_prim=False))
    x = torch.randn(4)
    assert torch.allclose(thunder.jit(torch.square)(x), x * 2)
    with audit() as log, use_policy(AUDIT):
        thunder.jit(torch.square)(x)
    found = _ours(log)
    assert len(found) == 1 and "first at square, which runs otherwise than eager's torch.square" in found[0]["message"]
    assert "_square_as_doubling" in str(found[0]["culprit"])


def _mlp(x: T, w1: T, w2: T) -> T:
    return F.gelu(x @ w1) @ w2


WORKING: dict[str, tuple[Callable[..., Any], Callable[[], tuple[Any, ...]]]] = {
    "mlp": (_mlp, lambda: (torch.randn(8, 16), torch.randn(16, 32), torch.randn(32, 4))),
    "softmax and layer norm": (lambda x: F.layer_norm(torch.softmax(x, -1), (9,)), lambda: (torch.randn(5, 9),)),
    "a long sum": (lambda x: (x * 3).sum(), lambda: (torch.randn(100_000),)),
    "half precision": (lambda x, w: (x @ w).relu(), lambda: (torch.randn(8, 64).half(), torch.randn(64, 8).half())),
    "integers and bools": (lambda x: (x.argmax(-1), x > 0, (x > 0).sum()), lambda: (torch.randn(4, 5),)),
    "the input itself and a view": (lambda x: (x, x.t(), x[1:]), lambda: (torch.randn(3, 3),)),
    "a dtype change": (lambda x: x.to(torch.float64) * 2, lambda: (torch.randn(3),)),
    "ill-conditioned": (lambda x: F.layer_norm(x, (64,)), lambda: (1e4 + 0.1 * torch.randn(2, 64),)),
    "requires grad": (_mlp, lambda: (torch.randn(8, 16, requires_grad=True), torch.randn(16, 32, requires_grad=True),
                                     torch.randn(32, 4))),
}


@pytest.mark.parametrize("fusion", [False, True], ids=["default executors", "torch.compile's executor"])
@pytest.mark.parametrize("name", list(WORKING))
def test_a_program_that_returns_eagers_values_is_not_reported(name: str, fusion: bool) -> None:
    program, make = WORKING[name]
    torch.manual_seed(0)  # (an ill-conditioned draw can take torch.compile's plain result past the tolerance below)
    args = make()
    executors = [torch_compile_ex, *thunder.get_default_executors()] if fusion else None
    for want, got in zip(handed_to_caller(program(*args)), handed_to_caller(thunder.jit(program, executors=executors)(*args))):
        assert torch.allclose(got.double(), want.double(), rtol=1e-2, atol=1e-2), "plain Thunder is not eager here"
    with installed(), use_policy(STRICT), audit() as log:
        thunder.jit(program, executors=executors)(*args)
    assert _ours(log) == []


@pytest.mark.parametrize("program", [
    pytest.param(lambda x: torch.empty(3) * 0 + x.sin(), id="uninitialized memory"),
    pytest.param(lambda x, i: torch.zeros(4).scatter(0, i, x.sin()), id="scatter with repeated indices"),
    pytest.param(lambda x, i: F.dropout(x.sin(), 0.5) + i.float().sum(), id="a random op"),
])
def test_a_program_two_runs_need_not_agree_on_is_not_judged(program: Callable[..., T]) -> None:
    executors = [COSINE, *thunder.get_default_executors()]  # wrong, but two runs of the program need not agree
    args = (torch.randn(3), torch.tensor([0, 0, 1]))[: program.__code__.co_argcount]
    with audit() as log, use_policy(AUDIT):
        thunder.jit(program, executors=executors)(*args)
    assert _ours(log) == []


def test_a_program_that_updates_its_input_is_judged_on_what_it_returns_too() -> None:
    def update(x: T) -> T:
        x.add_(1)
        return x.sin()

    x = torch.randn(3)
    before = x.clone()
    with audit() as log, use_policy(AUDIT):
        thunder.jit(update, executors=[COSINE, *thunder.get_default_executors()])(x)
    assert len(_ours(log)) == 1
    assert torch.allclose(x, before + 1)  # the program's own update, once: the replays ran on copies


@pytest.mark.parametrize("program", [
    pytest.param(lambda x: x.add_(1), id="add_ returned"),
    pytest.param(lambda x: x.mul_(2).sub_(1, alpha=2), id="two updates"),
    pytest.param(lambda x: x.t().add_(1) * 0 + x, id="through a view"),
])
def test_a_program_that_updates_an_input_and_returns_it_is_not_reported(program: Callable[[T], T]) -> None:
    """What the program returns is the input as its update left it, in eager's run as in Thunder's."""
    x = torch.randn(3, 3)
    with installed(), use_policy(STRICT), audit() as log:
        thunder.jit(program)(x.clone())
    assert _ours(log) == []


def _counts_positive(x: T) -> Any:
    from thunder.core import prims

    count = prims.sum(x > 0, (0,))  # a prim: Thunder's sum of bools is bool (torch.sum's is int64)
    return prims.convert_element_type(count, thunder.dtypes.float32) + 1


def test_a_prim_is_judged_by_thunders_semantics_not_by_the_torch_function_of_its_name() -> None:
    """Found running Thunder's test_grad.py under strict (vjp programs call prims at the top level): prims.sum of
    bools, recorded as bool, was reported because the torch executor's torch.sum gives int64 there."""
    x = torch.tensor([1.0, -1.0, 2.0])
    with installed(), use_policy(STRICT), audit() as log:
        assert float(thunder.jit(_counts_positive)(x)) == 3.0
    assert [v for v in log.to_dict()["violations"] if v["kind"] in (KIND, METADATA)] == []


def test_the_check_can_be_switched_off() -> None:
    x = torch.randn(5)
    with installed(), use_policy(STRICT.replace(output_wrong_value="off")), audit() as log:
        thunder.jit(_sine, executors=[COSINE, *thunder.get_default_executors()])(x)
    assert _ours(log) == []


def test_program_outputs_reads_each_form_a_computation_returns() -> None:
    a, b = torch.ones(1), torch.zeros(1)
    assert handed_to_caller((a, b)) == [a, b]
    assert handed_to_caller({"output": (a,), "flat_args": [b]}) == [a]
    assert handed_to_caller(({"output": a, "flat_args": [b], "flat_output": (a,)}, ((b,), ()))) == [a]


def _centred_rows(x: T) -> T:
    c = (x - x.mean(-1, keepdim=True)).sum(-1, keepdim=True)
    return c @ torch.ones(1, 4)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_float32_noise_with_a_float32_constant_is_not_reported(seed: int) -> None:
    """The exact sum is 0, float32 gives both eager and Thunder noise; the float64 reference cannot run (the program's
    float32 constant meets float64), so the reference's own move under a few ulps of its inputs judges it."""
    x = 1e4 + torch.randn(8, 4096, generator=torch.Generator().manual_seed(seed))
    with installed(), use_policy(STRICT), audit() as log:
        thunder.jit(_centred_rows, executors=[torch_compile_ex])(x)
    assert _ours(log) == []


def test_the_replay_copies_inputs_with_their_strides_so_a_compiled_region_is_not_compiled_again() -> None:
    import torch._dynamo.utils as dynamo_utils

    def graphs(checked: bool) -> int:
        dynamo_utils.counters.clear()
        torch._dynamo.reset()
        base = torch.randn(8, 16)
        jitted = thunder.jit(lambda x: (x * 2).sin(), executors=[torch_compile_ex])
        if checked:
            with installed(), use_policy(STRICT):
                jitted(base[:, ::2])
        else:
            jitted(base[:, ::2])
        return int(dynamo_utils.counters["stats"]["unique_graphs"])

    assert graphs(True) == graphs(False) > 0


def test_a_value_wrong_only_for_the_calls_strides_is_reported() -> None:
    strided = _wrong_executor("test_sin_strided", ltorch.sin,
                              lambda x: torch.sin(x) if x.is_contiguous() else torch.cos(x))
    base = torch.randn(4, 8)
    executors = [strided, *thunder.get_default_executors()]
    assert not torch.allclose(thunder.jit(_sine, executors=executors)(base[:, ::2]), _sine(base[:, ::2]))
    with audit() as log, use_policy(AUDIT):
        thunder.jit(_sine, executors=executors)(base[:, ::2])
    assert len(_ours(log)) == 1


@pytest.mark.parametrize("program", [
    pytest.param(lambda x: F.one_hot((x > 0).long(), 2).float().sum(-1) + x.sin(), id="one_hot (a scatter inside)"),
    pytest.param(torch.nn.BatchNorm1d(3).train().requires_grad_(False), id="a program that updates its buffers"),
])
def test_a_program_with_a_determined_part_or_updates_is_judged(program: Callable[[T], T]) -> None:
    executors = [COSINE, *thunder.get_default_executors()]
    x = torch.randn(4, 3)
    call = program if not isinstance(program, torch.nn.Module) else (lambda x: program(x).sin())
    with audit() as log, use_policy(AUDIT):
        thunder.jit(call, executors=executors)(x)
    assert len(_ours(log)) == 1


def test_inputs_beyond_the_budget_are_not_copied(monkeypatch: pytest.MonkeyPatch) -> None:
    from safe_tracectx.hooks import output_replay

    monkeypatch.setattr(output_replay, "BUDGET_BYTES", 4)
    with audit() as log, use_policy(AUDIT):
        thunder.jit(_sine, executors=[COSINE, *thunder.get_default_executors()])(torch.randn(5))
    assert _ours(log) == []


def test_an_output_torch_cannot_compare_is_passed_over_without_an_internal_error() -> None:
    with warnings.catch_warnings(record=True) as said:
        warnings.simplefilter("always")
        with audit() as log, use_policy(AUDIT):
            thunder.jit(lambda x: (x * 2).to(torch.float8_e4m3fn))(torch.randn(4))
    assert [str(w.message) for w in said if "safe-tracectx" in str(w.message)] == []
    assert _ours(log) == []


def test_a_sparse_input_is_not_copied_and_the_program_goes_on_unwarned() -> None:
    """Thunder's own test_clone_sparse_coo: a sparse tensor has no storage to copy, so the replay does not judge it
    (it once ended in an internal error, said as a RuntimeWarning)."""
    with warnings.catch_warnings(record=True) as said:
        warnings.simplefilter("always")
        with installed(), use_policy(STRICT):
            copied = thunder.jit(lambda a: a.clone())(torch.randn(3, 5).to_sparse())
            pair = thunder.jit(lambda a, b: (a.clone(), b * 2))(torch.randn(3, 5).to_sparse(), torch.randn(2))
    assert copied.layout == pair[0].layout == torch.sparse_coo
    assert [str(w.message) for w in said if "safe-tracectx" in str(w.message)] == []


def test_an_input_handed_back_that_requires_grad_is_compared_without_torchs_warning() -> None:
    """Thunder's own test_dataclass_output[True]: comparing the input the program hands back (a copy that requires
    grad, as the caller's does) once warned the user about converting a tensor that requires grad to a scalar."""
    x = torch.randn(3, requires_grad=True)
    with warnings.catch_warnings(record=True) as said:
        warnings.simplefilter("always")
        with installed(), use_policy(STRICT):
            returned, _ = thunder.jit(lambda x: (x, x + 2))(x)
    assert returned is x
    assert [str(w.message) for w in said if "requires_grad=True to a scalar" in str(w.message)] == []


@pytest.mark.parametrize("make", [
    pytest.param(lambda: torch.randn(3, dtype=torch.cfloat).conj(), id="a conjugate view"),
    pytest.param(lambda: torch.randn(3, dtype=torch.cfloat).conj().imag, id="a negative view"),
    pytest.param(lambda: torch.randn(3, dtype=torch.cfloat, requires_grad=True).conj(), id="a conjugate view with grad"),
])
def test_an_input_with_a_lazy_conjugate_or_negation_is_copied_as_it_reads(make: Callable[[], T]) -> None:
    """The replay's copy of an input keeps the view's conjugate and negation bits (its storage holds the values
    before them): a copy without them gave the compiled program other values than the reference, a false report."""
    from safe_tracectx.hooks.replay import exact_copy

    x = make()
    assert torch.equal(exact_copy(x), x.detach()) and exact_copy(x).is_conj() == x.is_conj()
    with installed(), use_policy(STRICT):
        got = thunder.jit(lambda x: x * 2)(x)
    assert torch.allclose(got, x * 2)


def test_past_the_byte_limit_the_reference_still_computes_every_tensor_the_return_holds(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Over MOST_BYTES only what the return statement holds is computed: that includes Thunder's flat_args (an input
    updated in place, t4 here), not only what the caller gets."""
    from safe_tracectx.hooks import eager_reference

    def updates(x: T, y: T) -> T:
        x.add_(1)
        return y * x

    jitted = thunder.jit(updates)
    jitted(torch.randn(3), torch.randn(3))
    from safe_tracectx.traces.returns import return_value

    def computed_flat_args(trace: Any) -> set[str]:
        value = return_value(trace)
        flat = value.get("flat_args", ()) if isinstance(value, dict) else ()
        return {p.name for p in flat} - {a.name for a in trace.args}

    program = next(t for t in thunder.last_traces(jitted) if computed_flat_args(t))  # functionalized: x is t4
    monkeypatch.setattr(eager_reference, "MOST_BYTES", 0)
    values = eager_reference.every_value(program, {a.name: torch.randn(3) for a in program.args})
    assert values is not None
    flat_args = {p.name for p in return_value(program)["flat_args"]}
    assert flat_args - {a.name for a in program.args}, "no computed tensor among the flat_args: nothing is tested"
    assert flat_args <= set(values)
