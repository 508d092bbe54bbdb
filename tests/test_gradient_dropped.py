"""gradient-dropped: the backward gives no gradient to an input eager PyTorch differentiates (#1787's class).

Thunder's own rules give every differentiable input a gradient on the Thunder installed here,
so each bug is put back as it was: ``older_copy_rule`` restores the grad rule of
``prims.copy_`` from before Thunder 0.2.4 (``lambda g: (None, None)``), under which a symbol
whose decomposition copies into a tensor it made loses the gradient (#1787: ``Tensor.to(copy=True)``);
``broken_cos_rule`` is a grad rule that forgets its ``put_grad``. Eager PyTorch is the oracle:
each test first shows that plain Thunder computes another gradient.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Iterator
from typing import Any

import pytest
import torch

from safe_tracectx import STRICT, BrokenTraceError, use_policy
from safe_tracectx.hooks import audit, installed
from safe_tracectx.policy import AUDIT

with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    import thunder
    from thunder.core import prims
    from thunder.core import transforms as thunder_transforms
    from thunder.core.langctxs import Languages, langctx
    from thunder.core.prims import PrimIDs
    from thunder.core import transform_common as thunder_transform_common
    from thunder.core.symbol import Symbol
    from thunder.core.trace import from_trace


@langctx(Languages.TORCH)
def _copied_meta(a: Any) -> Any:
    """A new tensor computed by an in-place prim: ``t0 = prims.empty(...); t1 = prims.copy_(a, t0)`` (#1775's
    ``Tensor.to(copy=True)``)."""
    return prims.copy_(a, prims.empty(a.shape, device=a.device, dtype=a.dtype), grad_enabled=True)


copied = Symbol(name="copied", meta=_copied_meta, id=f"{__name__}.copied")


@pytest.fixture
def older_copy_rule() -> Iterator[None]:
    """The grad rule of prims.copy_ before Thunder 0.2.4: no gradient for the source (nor the destination)."""
    rules = thunder_transforms.backward_impls
    before = rules[PrimIDs.COPY_]
    rules[PrimIDs.COPY_] = lambda g: (None, None)
    try:
        yield
    finally:
        rules[PrimIDs.COPY_] = before


def _cos_forgetting_its_gradient(a: Any) -> Any:
    out = prims.cos(a)
    thunder_transforms.get_grad(out)  # type: ignore[attr-defined]  # read, never put: a gets no gradient
    return out


@pytest.fixture
def broken_cos_rule() -> Iterator[None]:
    rules = thunder_transforms._grad_fn_map
    before = rules.get(PrimIDs.COS)
    rules[PrimIDs.COS] = _cos_forgetting_its_gradient
    try:
        yield
    finally:
        if before is None:
            del rules[PrimIDs.COS]
        else:
            rules[PrimIDs.COS] = before


def copy_then_scale(a: torch.Tensor) -> torch.Tensor:
    return copied(a) * 2  # type: ignore[no-any-return]


def eager_copy_then_scale(a: torch.Tensor) -> torch.Tensor:
    return a.clone() * 2


def cos_and_add(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    return x.cos() * 2 + y


def _grads(function: Callable[..., torch.Tensor], *shapes: int) -> list[Any]:
    inputs = [torch.arange(float(n)).requires_grad_() for n in shapes]
    out = function(*inputs)
    if out.requires_grad:
        out.sum().backward()  # type: ignore[no-untyped-call]
    return [x.grad for x in inputs]


def test_a_copy_into_a_new_tensor_under_the_older_rule_is_reported_and_charged_to_its_symbol(
    older_copy_rule: None,
) -> None:
    assert _grads(eager_copy_then_scale, 3)[0] is not None
    assert _grads(thunder.jit(copy_then_scale), 3) == [None]  # plain Thunder: the result has no grad_fn
    with installed(STRICT), pytest.raises(BrokenTraceError) as info:
        thunder.jit(copy_then_scale)(torch.ones(3, requires_grad=True))
    error = info.value
    assert error.kind == "gradient-dropped" and error.names[:2] == ("a", "t1")
    assert error.culprit == ("_copied_meta", f"{__name__}._copied_meta")
    assert "the split makes no backward, so it gives no gradient for a" in error.message
    assert "copying into a tensor it made (prims.copy_)" in error.message
    assert "#1787" in error.fix


def test_a_grad_rule_that_forgets_an_input_is_charged_to_the_pass_that_returned_the_backward(
    broken_cos_rule: None,
) -> None:
    x_grad, y_grad = _grads(thunder.jit(cos_and_add), 3, 3)
    assert x_grad is None and y_grad is not None  # plain Thunder drops x's gradient only
    with audit() as log, use_policy(AUDIT):
        thunder.jit(cos_and_add)(torch.ones(3, requires_grad=True), torch.ones(3, requires_grad=True))
    (violation,) = [v for v in log.to_dict()["violations"] if v["kind"] == "gradient-dropped"]
    assert violation["names"] == ["x"]  # y gets its gradient
    assert "the backward returns no gradient (None) for x" in violation["message"]
    assert "t0 = bound symbol" in violation["message"]  # the path: cos, mul, add
    assert "split" in str(violation["culprit"])


def test_it_can_be_switched_off_on_its_own(broken_cos_rule: None) -> None:
    with audit() as log, use_policy(STRICT, gradient_dropped="off"):
        thunder.jit(cos_and_add)(torch.ones(3, requires_grad=True), torch.ones(3, requires_grad=True))
    assert log.to_dict()["violations"] == []


class _StraightThrough(torch.autograd.Function):
    @staticmethod
    def forward(ctx: Any, x: torch.Tensor, scale: torch.Tensor) -> torch.Tensor:
        return x * scale

    @staticmethod
    def backward(ctx: Any, grad: torch.Tensor) -> tuple[torch.Tensor, None]:
        return grad, None  # the program's choice: no gradient for scale


def own_backward(x: torch.Tensor, scale: torch.Tensor) -> torch.Tensor:
    return _StraightThrough.apply(x, scale).sin()  # type: ignore[no-untyped-call,no-any-return]


def no_gradient_by_design(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    with torch.no_grad():
        frozen = y * 2
    mask = (x > 1).to(x.dtype)  # x read through a comparison only
    return torch.zeros_like(y) + frozen + y.detach() + mask + x.new_ones(x.shape) + x.sign()


def copies_into_a_buffer(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    z = torch.zeros_like(x)
    z.copy_(y)  # a top-level in-place copy: functionalized, y gets the gradient
    return z * x


def returned_as_it_is(x: torch.Tensor, y: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    return x, y * 2  # the backward gives x None: autograd connects the output x to the input x itself


def summed(function: Callable[..., Any]) -> Callable[..., torch.Tensor]:
    def scalar(*args: torch.Tensor) -> torch.Tensor:
        out = function(*args)
        return sum(o.sum() for o in out) if isinstance(out, tuple) else out  # type: ignore[no-any-return]
    return scalar


@pytest.mark.parametrize("function", [own_backward, no_gradient_by_design, copies_into_a_buffer, cos_and_add,
                                      returned_as_it_is])
def test_gradients_eager_does_not_give_or_thunder_gives_are_not_reported(function: Callable[..., torch.Tensor]) -> None:
    eager, jitted = _grads(summed(function), 3, 3), _grads(summed(thunder.jit(function)), 3, 3)
    zero = torch.zeros(3)
    assert all(torch.allclose(zero if e is None else e, zero if j is None else j) for e, j in zip(eager, jitted))
    assert all(j is not None for e, j in zip(eager, jitted) if e is not None)  # Thunder drops no gradient here
    with audit() as log, use_policy(STRICT):
        thunder.jit(function)(torch.ones(3, requires_grad=True), torch.ones(3, requires_grad=True))
    assert log.to_dict()["violations"] == []


INDEX = torch.tensor([0, 2, 1])


def put_then_add(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    return torch.zeros(3).index_put((INDEX,), x) + y


def test_index_put_values_lose_their_gradient_on_this_thunder_and_strict_says_so() -> None:
    """docs/findings.md 16: the grad transform zips an old-style backward's gradients with the symbol's arguments
    by position, so index_put's gradient for ``values`` goes to ``indices`` and is dropped (0.2.6 and main)."""
    assert _grads(put_then_add, 3, 3)[0] is not None
    assert _grads(thunder.jit(put_then_add), 3, 3)[0] is None  # plain Thunder: x gets no gradient, silently
    with installed(STRICT), pytest.raises(BrokenTraceError) as info:
        thunder.jit(put_then_add)(torch.ones(3, requires_grad=True), torch.ones(3, requires_grad=True))
    assert info.value.kind == "gradient-dropped" and info.value.names == ("x",)
    assert "index_put" in info.value.message and "the backward returns no gradient (None) for x" in info.value.message


def add_in_place_then_use(p: torch.Tensor, q: torch.Tensor) -> torch.Tensor:
    return p.add_(1) * 2 + q


def test_an_input_updated_in_place_loses_its_gradient_on_this_thunder_and_strict_says_so() -> None:
    """docs/findings.md 17: the gradient of an input a program updates in place (a non-leaf tensor, which eager
    allows) is looked up under the updated value's name, and the input gets none (0.2.6 and main)."""
    grads = []
    for function in (add_in_place_then_use, thunder.jit(add_in_place_then_use)):
        leaf, q = torch.ones(3, requires_grad=True), torch.ones(3, requires_grad=True)
        function(leaf * 1, q).sum().backward()
        grads.append(leaf.grad)
    assert grads[0] is not None and grads[1] is None  # eager [2, 2, 2]; plain Thunder: none, silently
    leaf = torch.ones(3, requires_grad=True)
    with installed(STRICT), pytest.raises(BrokenTraceError) as info:
        thunder.jit(add_in_place_then_use)(leaf * 1, torch.ones(3, requires_grad=True))
    assert info.value.kind == "gradient-dropped" and info.value.names == ("p",)


def returned_and_put(x: torch.Tensor, y: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    return x, torch.zeros(3).index_put((INDEX,), x) + y


def test_an_input_also_returned_as_it_is_is_judged_on_its_other_paths() -> None:
    """Autograd gives x the returned output's gradient directly; the backward's None covers the index_put path."""
    eager = _grads(summed(returned_and_put), 3, 3)[0]
    jitted = _grads(summed(thunder.jit(returned_and_put)), 3, 3)[0]
    assert eager is not None and jitted is not None and not torch.allclose(eager, jitted)  # 2 against 1
    with installed(STRICT), pytest.raises(BrokenTraceError) as info:
        thunder.jit(returned_and_put)(torch.ones(3, requires_grad=True), torch.ones(3, requires_grad=True))
    assert info.value.kind == "gradient-dropped" and info.value.names == ("x",)


class _DropFirstGradient(thunder_transform_common.Transform):
    """A buggy transform: after the split, the backward forgets the first input's gradient."""

    def transform_trace_post_optimization(self, trace: Any, **kwargs: Any) -> Any:  # type: ignore[override]
        ret = trace.bound_symbols[-1]
        if ret.sym.id != PrimIDs.RETURN or not ret.args or not isinstance(ret.args[0], tuple) or len(ret.args[0]) != 2:
            return trace
        new = from_trace(trace)
        new.bound_symbols = [*trace.bound_symbols[:-1], ret.from_bsym(args=((None, ret.args[0][1]),))]
        return new


def sin_times(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    return x.sin() * y


def test_a_step_after_the_split_that_drops_a_gradient_is_charged_when_the_backward_is_about_to_run() -> None:
    assert _grads(thunder.jit(sin_times, transforms=[_DropFirstGradient()]), 3, 3)[0] is None
    with installed(STRICT), pytest.raises(BrokenTraceError) as info:
        thunder.jit(sin_times, transforms=[_DropFirstGradient()])(
            torch.ones(3, requires_grad=True), torch.ones(3, requires_grad=True))
    assert info.value.kind == "gradient-dropped" and info.value.names == ("x",)
    assert info.value.culprit is not None
    assert info.value.culprit[1] == f"{__name__}._DropFirstGradient.transform_trace_post_optimization"
    assert "the trace about to run" in info.value.message


def checkpointed(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    def body(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        with torch.no_grad():
            frozen = a * 2  # read with grad disabled: eager gives a no gradient
        return torch.where(a > 0, b, 0.0) * frozen + b.long().float()
    return torch.utils.checkpoint.checkpoint(body, x, y, use_reentrant=False)  # type: ignore[no-any-return]


def test_a_checkpointed_body_under_thunderfx_is_followed_inside() -> None:
    """ThunderFX makes the checkpointed body one symbol: its no_grad region, mask and integer cast cut the
    gradient inside it as at the top level."""
    from thunder.dynamo import ThunderCompiler

    torch._dynamo.reset()
    compiled = torch.compile(checkpointed, backend=ThunderCompiler())  # type: ignore[no-untyped-call]
    assert _grads(checkpointed, 3, 3)[0] is None and _grads(compiled, 3, 3)[0] is None
    with audit() as log, use_policy(STRICT):
        compiled(torch.ones(3, requires_grad=True), torch.ones(3, requires_grad=True)).sum().backward()  # type: ignore[no-untyped-call]
    assert log.to_dict()["violations"] == []


def _detached_after_update(p: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    with torch.no_grad():
        p.view(-1).mul_(2)
    return w * p.detach()


def test_an_update_aliases_output_dead_code_elimination_dropped_keeps_the_others_places() -> None:
    """Before #2396's fix dead-code elimination replaced an unused output by None (``(_, t11, t12) =
    update_aliases((t9, t8, t3))``): each output still hands on the input at its own place."""
    from safe_tracectx.traces.gradient_flow import differentiated, gradient_walk, handed_on, storages

    jitted = thunder.jit(_detached_after_update)
    jitted(torch.randn(3, requires_grad=True), torch.randn(3, requires_grad=True))
    program = next(t for t in thunder.last_traces(jitted) if "alias" in str(t.get_provenance()).lower())
    last = max(i for i, b in enumerate(program.bound_symbols) if b.sym.id == PrimIDs.UPDATE_ALIASES)
    bsym = program.bound_symbols[last]
    places = [(p.name, q.name) for p, q in handed_on(bsym)]
    dropped = bsym.from_bsym(output=(None, *bsym.output[1:]))  # as that dead-code elimination left it
    assert [(p.name, q.name) for p, q in handed_on(dropped)] == places[1:]
    changed = from_trace(program)
    changed.bound_symbols = [*program.bound_symbols[:last], dropped, *program.bound_symbols[last + 1 :]]
    reach, _ = gradient_walk(changed, differentiated(changed, grad_enabled=True), storages(changed), from_inputs=False)
    assert "p" not in reach  # the detached alias's gradient goes to the detached value only
