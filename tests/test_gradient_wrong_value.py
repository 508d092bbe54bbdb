"""gradient-wrong-value: the forward and backward about to run give an input another gradient than autograd.

The program the split differentiates is replayed under PyTorch's autograd, and the pair as
Thunder runs it, on the same inputs (the call's own, else random ones) and random cotangents
(``hooks.gradient_replay``). Two bugs of the class a Thunder user writes: an executor's grad
transform that computes another derivative, and a Transform that changes the backward after
the split. Thunder's own, found by this check without being written for them: a CPU 0-dim
value's gradient given the full shape (docs/findings.md 12), the padding row of
``padding_idx=-1`` (24), and NaN gradients of ops whose decomposition the split
differentiates for want of a grad rule (25). Eager PyTorch is the oracle throughout.
"""

from __future__ import annotations

import functools
import gc
import re
import warnings
import weakref
from collections.abc import Callable, Iterator
from typing import Any

import pytest
import torch
import torch.nn.functional as F

from safe_tracectx import STRICT, BrokenTraceError, use_policy
from safe_tracectx.hooks import audit, gradient_replay, installed
from safe_tracectx.policy import AUDIT

with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    import thunder
    import thunder.torch as ltorch
    from thunder.core import prims
    from thunder.core.proxies import TensorProxy
    from thunder.core.trace import TraceCtx, from_trace, tracectx
    from thunder.core.transform_common import Transform
    from thunder.core.transforms import get_grad, put_grad  # type: ignore[attr-defined]
    from thunder.executors import torchex
    from thunder.extend import OperatorExecutor, deregister_executor, register_executor

T = torch.Tensor
KIND = "gradient-wrong-value"


class NegatesGradients(Transform):
    """After the split, the backward returns each gradient negated: a step that changes what the backward gives."""

    def transform_trace_post_optimization(self, computation_trace: TraceCtx, **kwargs: Any) -> TraceCtx:
        trace = computation_trace
        if trace.siginfo().name != "backward_fn":
            return trace
        new = from_trace(trace)
        new.bound_symbols = list(trace.bound_symbols[:-1])
        with tracectx(new):
            grads = tuple(torchex.neg(g) if isinstance(g, TensorProxy) else g for g in trace.bound_symbols[-1].args[0])
            prims.python_return(grads)
        return new


@pytest.fixture
def twice_the_sine() -> Iterator[OperatorExecutor]:
    """An executor whose grad transform of ``sin`` gives twice the derivative."""
    executor = OperatorExecutor("twice_the_sine", version="0.1")
    register_executor(executor)
    mysin = executor.register_operator("mysin", like=ltorch.sin, fn=torch.sin)

    def sin_grad(a: TensorProxy) -> Any:
        out = mysin(a)
        put_grad(a, get_grad(out) * ltorch.cos(a) * 2)
        return out

    executor.register_implementation(ltorch.sin, mysin, grad_transform=sin_grad)
    yield executor
    deregister_executor(executor)


def layer(x: T, w: T, b: T) -> T:
    return (torch.sin(x @ w) + b).sum(-1)


def _inputs() -> tuple[T, T, T]:
    generator = torch.Generator().manual_seed(3)
    return (torch.randn(3, 4, generator=generator, requires_grad=True),
            torch.randn(4, 4, generator=generator, requires_grad=True), torch.randn(4, generator=generator))


def _grads(function: Callable[..., T], *args: T) -> list[T]:
    """Each argument's gradient (zeros where it gets none, or requires none)."""
    leaves = [a.detach().clone().requires_grad_(a.requires_grad) for a in args]
    torch.autograd.backward(function(*leaves).sum())
    return [leaf.grad if leaf.grad is not None else torch.zeros_like(leaf) for leaf in leaves]


def _ours(log: Any) -> list[Any]:
    return [v for v in log.to_dict()["violations"] if v["kind"] == KIND]


def test_an_executors_grad_transform_that_computes_another_derivative_is_raised_before_the_program_runs(
    twice_the_sine: OperatorExecutor,
) -> None:
    executors = [twice_the_sine, *thunder.get_default_executors()]
    eager = _grads(layer, *_inputs())
    plain = _grads(thunder.jit(layer, executors=executors), *_inputs())
    assert not torch.allclose(eager[0], plain[0])  # plain Thunder: a wrong x.grad, silently
    given = _inputs()
    with installed(), use_policy(STRICT), pytest.raises(BrokenTraceError) as raised:
        thunder.jit(layer, executors=executors)(*given)
    error = raised.value
    assert error.kind == KIND and set(error.names) == {"x", "w"}  # b requires no grad: not judged
    assert "another gradient than PyTorch's autograd" in str(error) and "relative error" in str(error)
    assert "make the grad rule" in str(error)
    assert error.culprit == ("forward/backward split", "thunder.transforms.autodiff.split_into_forward_and_backward")
    assert given[0].grad is None  # before anything ran a backward


def test_a_step_after_the_split_that_changes_the_backward_is_charged_to_that_step() -> None:
    eager = _grads(layer, *_inputs())
    plain = _grads(thunder.jit(layer, transforms=[NegatesGradients()]), *_inputs())
    assert torch.allclose(plain[0], -eager[0])
    with audit() as log, use_policy(AUDIT):
        thunder.jit(layer, transforms=[NegatesGradients()])(*_inputs())
    found = _ours(log)
    assert sorted(v["names"][0] for v in found) == ["w", "x"]
    assert all("NegatesGradients.transform_trace_post_optimization" in str(v["culprit"]) for v in found)


def test_thunders_own_wrong_gradient_of_a_cpu_scalar_is_found() -> None:
    def centred(x: T) -> T:
        return x * 2 + x.sum()

    x = torch.randn(3, requires_grad=True)
    assert not torch.allclose(_grads(centred, x)[0], _grads(thunder.jit(centred), x)[0])  # findings 12, 0.2.6
    with audit() as log, use_policy(AUDIT):
        thunder.jit(centred)(x)
    assert [v["names"] for v in _ours(log)] == [["x"]]


def _mlp(x: T, w1: T, w2: T) -> T:
    return F.gelu(x @ w1) @ w2


def _attention(q: T, k: T, v: T) -> T:
    return F.scaled_dot_product_attention(q, k, v, is_causal=True)


def _normed(x: T, w: T, b: T) -> T:
    return F.layer_norm(x, (8,), w, b) + F.rms_norm(x, (8,)) + F.normalize(x, dim=1)


def _mixed(x: T, i: T, t: T) -> T:
    picked = torch.where(x > 0, x, x * 0.5)[i]
    return F.cross_entropy(picked, t) + x.bfloat16().float().softmax(-1).sum() + x.topk(2)[0].sum()


def _no_grad_part(x: T, w: T) -> T:
    with torch.no_grad():
        frozen = x * 3  # computed without autograd: its executable form would differentiate it, so not judged
    return x @ w + frozen


def _scaled(x: T, w: T, scale: T) -> T:
    return (x @ w * scale).sum(-1)  # a 0-dim parameter: Thunder's backward gives it the full shape, autograd sums it


def _half_wide(x: T, w1: T, w2: T) -> T:
    return F.gelu(x.bfloat16() @ w1.bfloat16()).float().softmax(-1) @ w2  # rounding grows with the width, 256


def _returns_its_input(x: T, y: T) -> tuple[T, T]:
    return x, (x * y).sum()  # x reaches the caller as itself: autograd hands it that output's gradient directly


def _r(*shape: int, grad: bool = True) -> T:
    return torch.randn(*shape, requires_grad=grad)


WORKING: list[tuple[Callable[..., Any], Callable[[], tuple[T, ...]]]] = [
    (_mlp, lambda: (_r(4, 8), _r(8, 16), _r(16, 8))),
    (_attention, lambda: (_r(1, 2, 4, 8), _r(1, 2, 4, 8), _r(1, 2, 4, 8))),
    (_normed, lambda: (_r(4, 8), _r(8), _r(8, grad=False))),
    (_mixed, lambda: (_r(4, 5), torch.tensor([0, 2, 2]), torch.tensor([1, 0, 4]))),
    (_no_grad_part, lambda: (_r(2, 3), _r(3, 3))),
    (_scaled, lambda: (_r(4, 8), _r(8, 8), torch.tensor(0.5, requires_grad=True))),
    (_half_wide, lambda: (_r(32, 256), _r(256, 256), _r(256, 8))),
    (_returns_its_input, lambda: (_r(3, 4), _r(3, 4))),
]


@pytest.mark.parametrize("function, make", WORKING, ids=[f.__name__ for f, _ in WORKING])
def test_silent_where_thunders_gradients_are_eagers(function: Callable[..., Any], make: Callable[[], tuple[T, ...]]) -> None:
    args = make()
    eager, jitted = _summed(function), _summed(thunder.jit(function))
    for want, got in zip(_grads(eager, *args), _grads(jitted, *args)):
        assert torch.allclose(want, got, rtol=1e-2, atol=1e-2)
    with audit() as log, use_policy(AUDIT):
        thunder.jit(function)(*args)
    assert _ours(log) == []


def _summed(function: Callable[..., Any]) -> Callable[..., T]:
    def scalar(*args: T) -> T:
        out = function(*args)
        return sum((o.sum() for o in out), torch.zeros(())) if isinstance(out, tuple) else out.sum()
    return scalar


def test_a_loss_that_refuses_random_normal_values_is_replayed_on_values_in_the_unit_interval(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def bce(p: T, t: T) -> T:
        return F.binary_cross_entropy(torch.sigmoid(p), t)  # targets in [0, 1]: randn's are refused

    monkeypatch.setattr(gradient_replay, "call_values", lambda compilation: None)  # the call's own not at hand
    args = (_r(4, 3), torch.rand(4, 3))
    with audit() as log, use_policy(AUDIT):
        thunder.jit(bce, transforms=[NegatesGradients()])(*args)
    assert [v["names"] for v in _ours(log)] == [["p"]]


def test_torch_compiles_regions_are_not_replayed_so_the_user_gets_no_second_compile() -> None:
    import torch._dynamo.utils as dynamo_utils
    from thunder.executors.torch_compile import torch_compile_ex

    def graphs(audited: bool) -> int:
        dynamo_utils.counters.clear()
        torch._dynamo.reset()
        x = torch.randn(8, 4).t().requires_grad_()  # not contiguous: torch.compile guards on its strides
        jitted = thunder.jit(_mlp, executors=[torch_compile_ex, *thunder.get_default_executors()])
        if audited:
            with audit(), use_policy(AUDIT):
                jitted(x, _r(8, 8), _r(8, 8))
        else:
            jitted(x, _r(8, 8), _r(8, 8))
        return int(dynamo_utils.counters["stats"]["unique_graphs"])

    assert graphs(True) == graphs(False) > 0


def test_silent_under_the_callers_autocast_where_thunder_rounds_as_eager() -> None:
    args = (_r(16, 16), _r(16, 16))
    with torch.autocast("cpu", dtype=torch.bfloat16):
        for want, got in zip(_grads(_attention_free, *args), _grads(thunder.jit(_attention_free), *args)):
            assert torch.allclose(want, got, atol=2e-2)
        with audit() as log, use_policy(AUDIT):
            thunder.jit(_attention_free)(*args)
    assert _ours(log) == []


def _attention_free(x: T, w: T) -> T:
    return F.gelu(x @ w).softmax(-1)


def test_not_judged_and_the_users_generator_untouched_when_the_program_draws_random_numbers() -> None:
    def noisy(x: T, w: T) -> T:
        return F.dropout(x @ w, 0.5)

    torch.manual_seed(0)
    thunder.jit(noisy, transforms=[NegatesGradients()])(_r(2, 3), _r(3, 3))
    plain_next = torch.rand(1)
    torch.manual_seed(0)
    with audit() as log, use_policy(AUDIT):
        thunder.jit(noisy, transforms=[NegatesGradients()])(_r(2, 3), _r(3, 3))
    assert torch.equal(torch.rand(1), plain_next)
    assert _ours(log) == []


def test_switched_off_it_replays_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[Any] = []
    monkeypatch.setattr(gradient_replay, "replay", lambda *a, **k: calls.append(a))
    with installed(), use_policy(STRICT.replace(gradient_wrong_value="off")):
        thunder.jit(layer, transforms=[NegatesGradients()])(*_inputs())
    assert calls == []


def test_the_replay_is_the_packages_own_work_nothing_of_it_is_audited(monkeypatch: pytest.MonkeyPatch) -> None:
    def passes_run() -> list[str]:
        with audit() as log, use_policy(AUDIT):
            thunder.jit(layer, transforms=[NegatesGradients()])(*_inputs())
        return [r["label"] for r in log.to_dict()["pass_runs"]]

    replayed = passes_run()
    monkeypatch.setattr(gradient_replay, "replay", lambda *a, **k: None)
    assert replayed == passes_run()


FAR_OUT = [-1000.0, -100.0, -3.0, 0.5, 30.0, 100.0]  # exp(100) overflows float32


def _glu_of_both(x: T) -> T:
    return F.glu(torch.cat([x, x]), 0)


#: (the op, the symbol whose decomposition is at fault): docs/findings.md 25, on Thunder 0.2.6 and main.
NO_RULE = [(F.elu, "elu"), (F.selu, "selu"), (F.celu, "celu"), (F.mish, "mish"), (torch.sigmoid, "sigmoid"),
           (_glu_of_both, "sigmoid")]


@pytest.mark.parametrize("op, at_fault", NO_RULE, ids=[op.__name__ for op, _ in NO_RULE])
def test_a_decomposition_differentiated_for_want_of_a_grad_rule_is_charged_to_its_symbol(
    op: Callable[[T], T], at_fault: str,
) -> None:
    def f(x: T) -> T:
        return op(x)

    eager = _grads(f, torch.tensor(FAR_OUT, requires_grad=True))[0]
    plain = _grads(thunder.jit(f), torch.tensor(FAR_OUT, requires_grad=True))[0]
    assert torch.isfinite(eager).all() and not torch.isfinite(plain).all()  # Thunder's NaN, silently
    x = torch.tensor(FAR_OUT, requires_grad=True)
    with installed(), use_policy(STRICT), pytest.raises(BrokenTraceError) as raised:
        thunder.jit(f)(x)
    error = raised.value
    assert error.kind == KIND and error.names[0] == "x"
    assert error.culprit == (at_fault, f"thunder.torch.{at_fault}")  # glu's: the sigmoid in its decomposition
    assert re.search(rf"\({at_fault}\)( in the decomposition of bound symbol \d+ \(glu\))? has no grad rule in "
                     rf"this Thunder \(torch\.[a-z.]*{at_fault}\)", str(error)), str(error)
    assert "not finite where autograd's are" in str(error)
    assert re.search(rf"give torch\.[a-z.]*{at_fault} a grad rule", error.fix)
    assert x.grad is None and torch.equal(x.detach(), torch.tensor(FAR_OUT))  # nothing ran; the user's x as it was


def test_silent_where_the_decomposition_is_right_at_the_calls_own_values() -> None:
    x = torch.randn(64, requires_grad=True)
    assert torch.allclose(_grads(F.elu, x)[0], _grads(thunder.jit(F.elu), x)[0])
    with audit() as log, use_policy(AUDIT):
        thunder.jit(F.elu)(x)
    assert _ours(log) == []


def test_the_calls_own_indices_reach_a_row_random_ones_never_select() -> None:
    def embed(i: T, w: T) -> T:
        return F.embedding(i, w, padding_idx=-1)

    i, w = torch.tensor([[0, 4, 2], [4, 1, 4]]), torch.randn(5, 3, requires_grad=True)
    assert not torch.equal(_grads(embed, i, w)[1][4], _grads(thunder.jit(embed), i, w)[1][4])  # findings 24
    with audit() as log, use_policy(AUDIT):
        thunder.jit(embed)(i, w)
    assert [v["names"] for v in _ours(log)] == [["w"]]


def test_where_the_calls_own_values_have_no_finite_gradient_random_ones_are_replayed() -> None:
    def root(x: T) -> T:
        return torch.sqrt(x) * 2  # eager's gradient at 0 is inf: nothing to judge against there

    x = torch.tensor([0.0, 1.0, 4.0], requires_grad=True)
    with audit() as log, use_policy(AUDIT):
        thunder.jit(root, transforms=[NegatesGradients()])(x)
    assert [v["names"] for v in _ours(log)] == [["x"]]


def test_nothing_of_the_users_call_is_kept_alive() -> None:
    def alive_after_the_call(audited: bool) -> bool:
        x = torch.randn(3, 4, requires_grad=True)
        held = weakref.ref(x)
        jitted = thunder.jit(layer)
        if audited:
            with audit(), use_policy(AUDIT):
                jitted(x, _r(4, 4), torch.randn(4))
        else:
            jitted(x, _r(4, 4), torch.randn(4))
        del x
        gc.collect()
        return held() is not None

    assert alive_after_the_call(True) == alive_after_the_call(False)


def test_each_wrong_gradient_is_charged_to_the_decomposition_on_its_own_inputs_path() -> None:
    def two(x: T, y: T) -> T:
        return F.elu(y).sum() + torch.sigmoid(x).sum()

    with audit() as log, use_policy(AUDIT):
        thunder.jit(two)(torch.full((4,), -200.0, requires_grad=True), torch.full((4,), 100.0, requires_grad=True))
    culprits = {v["names"][0]: v["culprit"] for v in _ours(log)}
    assert culprits == {"x": "sigmoid (thunder.torch.sigmoid)", "y": "elu (thunder.torch.elu)"}


def test_a_decomposition_off_the_wrong_inputs_path_is_not_charged() -> None:
    def centred_and_a_saturated_elu(x: T, y: T) -> T:
        return (x * 2 + x.sum()).sum() + (F.elu(y) > 50).float().sum()  # y's gradient is right: 0

    with audit() as log, use_policy(AUDIT):
        thunder.jit(centred_and_a_saturated_elu)(torch.randn(3, requires_grad=True), torch.full((4,), 100.0, requires_grad=True))
    (found,) = _ours(log)  # x: Thunder's own wrong gradient of a CPU 0-dim value (findings 12), not elu's
    assert found["names"] == ["x"] and "elu" not in str(found["culprit"]) and "split" in str(found["culprit"])


def test_silent_where_float32_is_noise_for_eager_too() -> None:
    def normed(x: T) -> T:
        return F.layer_norm(x, (64,))

    x = (1e4 + 0.1 * torch.randn(8, 64, generator=torch.Generator().manual_seed(0))).requires_grad_()
    with installed(), use_policy(STRICT):  # Thunder's gradient is closer to float64's than eager's float32 one
        thunder.jit(normed)(x)


class Logged(dict[str, T]):
    """A dict subclass whose reads run the user's code: each read is counted in ``reads``."""

    def __init__(self, reads: list[str], **items: T) -> None:
        super().__init__(**items)
        self.reads = reads

    def __getitem__(self, key: str) -> T:
        self.reads.append(key)
        return dict.__getitem__(self, key)


def _reads_plain_and_audited(function: Callable[..., T], make: Callable[[list[str]], tuple[Any, ...]]) -> tuple[int, int]:
    """How many reads of the user's dict a plain jit call makes, and an audited one."""
    plain: list[str] = []
    thunder.jit(function)(*make(plain))
    audited: list[str] = []
    with audit(), use_policy(AUDIT):
        thunder.jit(function)(*make(audited))
    return len(plain), len(audited)


def test_the_calls_containers_are_not_read_again_when_reading_runs_the_users_code() -> None:
    def f(d: dict[str, T]) -> T:
        return d["a"].cos().sum()

    plain, audited = _reads_plain_and_audited(f, lambda reads: (Logged(reads, a=torch.randn(4, requires_grad=True)),))
    assert audited == plain > 0


def test_the_culprit_search_replays_each_form_once_whatever_the_number_of_wrong_inputs(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    calls: list[int] = []
    original = gradient_replay.wrong_gradients

    def counted(*args: Any, **kwargs: Any) -> Any:
        calls.append(1)
        return original(*args, **kwargs)

    monkeypatch.setattr(gradient_replay, "wrong_gradients", counted)

    def replays(width: int) -> int:
        calls.clear()
        inputs = [torch.full((3,), 100.0, requires_grad=True) for _ in range(width)]
        with audit() as log, use_policy(AUDIT):
            thunder.jit(lambda *xs: sum(F.elu(x).sum() for x in xs))(*inputs)
        assert len(_ours(log)) == width
        return len(calls)

    assert replays(2) == replays(5)


def _culprits(function: Callable[..., T], *args: T) -> dict[str, str]:
    with audit() as log, use_policy(AUDIT):
        thunder.jit(function)(*args)
    return {v["names"][0]: str(v["culprit"]) for v in _ours(log)}


def _far(value: float, n: int = 4) -> T:
    return torch.full((n,), value, requires_grad=True)


@pytest.mark.parametrize("function, args, expected", [
    # elu's saturated decomposition only feeds a comparison: no gradient goes through it
    (lambda x: (torch.sigmoid(x - 1000) * (F.elu(x) > 50).float()).sum(), (_far(100.0),),
     {"x": "sigmoid (thunder.torch.sigmoid)"}),
    # glu's decomposition is wrong in its gate half, which comes from y; x's gradient is wrong for another reason
    (lambda x, y: (x * 2 + x.sum()).sum() + F.glu(torch.cat([x, y], -1)).sum(), (torch.randn(3, requires_grad=True), _far(-200.0, 3)),
     {"x": "forward/backward split (thunder.transforms.autodiff.split_into_forward_and_backward)",
      "y": "sigmoid (thunder.torch.sigmoid)"}),
    # forty decomposed ops with rules of their own before the one at fault
    (lambda x: torch.sigmoid(functools.reduce(lambda h, _: h * 1.01 + 0.001, range(40), x) - 1000).sum(), (_far(0.0),),
     {"x": "sigmoid (thunder.torch.sigmoid)"}),
    # torch.max does not take Thunder's bound arguments: left to the torch executor, the rest eager's own ops
    (lambda x, w: torch.sigmoid(x).sum() + w.max(), (_far(-200.0), torch.randn(4, requires_grad=True)),
     {"x": "sigmoid (thunder.torch.sigmoid)"}),
    # z's reference gradient is infinite at 0 (eager's too): x is still judged on the call's own values
    (lambda x, z: torch.sigmoid(x).sum() + torch.sqrt(z).sum(), (_far(-200.0, 3), torch.tensor([0.0, 1.0, 4.0], requires_grad=True)),
     {"x": "sigmoid (thunder.torch.sigmoid)"}),
], ids=["gate", "shared-glu", "long-path", "max", "partly-infinite"])
def test_a_wrong_gradient_is_charged_where_it_comes_from(
    function: Callable[..., T], args: tuple[T, ...], expected: dict[str, str],
) -> None:
    assert _culprits(function, *args) == expected


def test_a_branch_float64_takes_otherwise_excuses_only_its_own_element() -> None:
    def centred_and_branching(x: T) -> T:
        return (x * 2 + x.sum()).sum() + torch.where(x > 0.1, x * 100, x * -100).sum()

    x = torch.tensor([0.1, 0.5, -0.3, 0.2], requires_grad=True)  # 0.1f > 0.1 is False; in float64 it is True
    assert list(_culprits(centred_and_branching, x)) == ["x"]  # findings 12's wrong gradient, 3 off everywhere


def test_silent_where_float32_computes_a_scale_invariant_gradient_as_noise() -> None:
    for seed in range(3):
        x = (1e4 + 0.1 * torch.randn(4, 8, 16, generator=torch.Generator().manual_seed(seed))).requires_grad_()
        assert _culprits(lambda x: F.group_norm(x, 2).pow(2).mean(), x) == {}


def test_an_attribute_of_an_object_in_the_call_is_not_read_again() -> None:
    class Holder:
        def __init__(self, reads: list[str]) -> None:
            self.d = Logged(reads, w=torch.randn(4, requires_grad=True))

    def f(h: Holder, x: T) -> T:
        return (h.d["w"] * x).sum()

    plain, audited = _reads_plain_and_audited(f, lambda reads: (Holder(reads), torch.randn(4)))
    assert audited == plain > 0
