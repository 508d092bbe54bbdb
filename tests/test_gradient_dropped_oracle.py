"""gradient-dropped against eager PyTorch as the oracle, over small programs of the operators users write.

For each program run eager and jitted with two inputs that require grad, the check reports an
input exactly when Thunder gives it no gradient where eager PyTorch gives one (not all zeros): no
false alarm where Thunder agrees with eager (a zero gradient and None agree: a floor division, a
copysign, an overwritten intermediate), and no miss where it drops one (``index_put``'s values on 0.2.6 and main, docs/findings.md 16). A program plain
Thunder cannot run has nothing to compare, and nothing of the kind is reported for it.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from typing import Any

import pytest
import torch
import torch.nn.functional as F

from safe_tracectx import use_policy
from safe_tracectx.hooks import audit
from safe_tracectx.policy import AUDIT

with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    import thunder

idx = torch.tensor([0, 2, 1])
mask = torch.tensor([True, False, True])
T = torch.Tensor

def _overwritten(x: T, y: T) -> T:
    z = x * 1
    z.copy_(y)  # z's old value, from x, is overwritten: x gets a zero gradient in eager, None in Thunder
    return z * 2


def _detached_after_no_grad_update(x: T, y: T) -> T:
    with torch.no_grad():
        x.mul_(2)  # update_aliases then groups detach's output with x: its gradient goes to its own place only
    return y * x.detach()


def _setitem(z: T, x: T, y: T) -> T:
    z[:2] = x[:2]
    return z * y


PROGRAMS: dict[str, Callable[[T, T], Any]] = {
    "identity": lambda x, y: x,
    "view": lambda x, y: x.view(3, 1),
    "index": lambda x, y: x[0] + y[1:],
    "tuple": lambda x, y: (x, x * 2, y),
    "dict": lambda x, y: {"a": x + y, "b": y.sin()},
    "inplace_clone": lambda x, y: x.clone().add_(y),
    "where": lambda x, y: torch.where(mask, x, y),
    "to64": lambda x, y: x.to(torch.float64) + y.double(),
    "intpath": lambda x, y: x.to(torch.int64).float() + y,
    "embedding": lambda x, y: F.embedding(idx, torch.stack([x, y, x * y])),
    "xent": lambda x, y: F.cross_entropy(torch.stack([x, y]), torch.tensor([0, 1])),
    "xent_soft": lambda x, y: F.cross_entropy(torch.stack([x, y]), torch.stack([y, x]).softmax(-1)),
    "mse": lambda x, y: F.mse_loss(x, y),
    "clamp": lambda x, y: x.clamp(min=y),
    "masked_fill": lambda x, y: x.masked_fill(mask, 0.0) * y,
    "cat": lambda x, y: torch.cat([x, y]).exp(),
    "sort": lambda x, y: torch.sort(x + y).values,
    "max": lambda x, y: torch.stack([x, y]).max(dim=0).values,
    "layer_norm": lambda x, y: F.layer_norm(torch.stack([x, y]), (3,), weight=y, bias=x),
    "sdpa": lambda x, y: F.scaled_dot_product_attention(x.view(1, 1, 3, 1).expand(1, 1, 3, 2), y.view(1, 1, 3, 1).expand(1, 1, 3, 2), x.view(1, 1, 3, 1).expand(1, 1, 3, 2), attn_mask=torch.stack([y, y, y])),
    "softmax": lambda x, y: (x * y).softmax(-1),
    "lerp": lambda x, y: torch.lerp(x, y, 0.3),
    "lerp_w": lambda x, y: torch.lerp(x, x * 2, y),
    "var_mean": lambda x, y: torch.var_mean(x + y),
    "cumsum": lambda x, y: (x * y).cumsum(0),
    "einsum": lambda x, y: torch.einsum("i,j->ij", x, y),
    "unbind": lambda x, y: torch.stack([x, y]).unbind(0)[1],
    "split": lambda x, y: torch.cat([x, y]).split(2)[1],  # type: ignore[no-untyped-call]
    "normal": lambda x, y: torch.normal(x, y.abs() + 1),
    "dropout": lambda x, y: F.dropout(x * y, 0.5, training=True),
    "gelu": lambda x, y: F.gelu(x) * y,
    "pow": lambda x, y: x.abs() ** y,
    "atan2": lambda x, y: torch.atan2(x, y),
    "fmod": lambda x, y: torch.fmod(x, y.abs() + 1),
    "remainder": lambda x, y: torch.remainder(x, y.abs() + 1),
    "floor_div": lambda x, y: torch.div(x, y.abs() + 1, rounding_mode="floor") + y,
    "copy_inplace": lambda x, y: torch.zeros(3).copy_(x) * y,
    "index_put": lambda x, y: torch.zeros(3).index_put((idx,), x) + y,
    "scatter": lambda x, y: torch.zeros(3).scatter(0, idx, x) * y,
    "gather": lambda x, y: torch.gather(x, 0, idx) * y,
    "index_add": lambda x, y: torch.zeros(3).index_add(0, idx, x) + y,
    "setitem": lambda x, y: _setitem(torch.zeros(3), x, y),
    "polygamma": lambda x, y: torch.polygamma(1, x.abs() + 1) * y,
    "prod": lambda x, y: (x * y).prod(),
    "norm": lambda x, y: torch.linalg.vector_norm(x - y),
    "interp": lambda x, y: F.interpolate(torch.stack([x, y]).view(1, 2, 3), scale_factor=2.0),
    "baddbmm": lambda x, y: torch.baddbmm(x.view(1, 3, 1), y.view(1, 3, 1), x.view(1, 1, 3)),
    "std": lambda x, y: torch.std(x * y),
    "logsumexp": lambda x, y: torch.logsumexp(x + y, 0),
    "topk": lambda x, y: torch.topk(x * y, 2).values,
    "amax": lambda x, y: torch.amax(torch.stack([x, y]), 0),
    "nll": lambda x, y: F.nll_loss(torch.stack([x, y]).log_softmax(-1), torch.tensor([0, 1])),
    "bce": lambda x, y: F.binary_cross_entropy_with_logits(x, y.sigmoid()),
    "one_hot": lambda x, y: F.one_hot(idx, 3).float() * x + y,
    "complex": lambda x, y: torch.view_as_real(torch.complex(x, y)).sum(-1),
    "outer_sum": lambda x, y: (x[:, None] + y[None, :]).sum(),
    "rand_like": lambda x, y: torch.rand_like(x) * y,
    "zeros_like": lambda x, y: torch.zeros_like(x) + y,
    "full_like": lambda x, y: torch.full_like(x, 2.0) * y,
    "new_tensor_from": lambda x, y: x.new_full((3,), 1.0) + y,
    "item_branch": lambda x, y: x * 2 if (x.sum() > -100) else y,
    "addcmul": lambda x, y: torch.addcmul(x, y, x),
    "hardtanh": lambda x, y: F.hardtanh(x) + y,
    "silu_inplace": lambda x, y: F.silu((x * y).clone(), inplace=True),
    "relu_": lambda x, y: (x * y).relu_(),
    "detach_all": lambda x, y: x.detach() + y.detach(),
    "div_floor": lambda x, y: torch.div(x, 2.0, rounding_mode="floor") * y,  # a zero-gradient step inside
    "copysign": lambda x, y: torch.copysign(y, x),
    "bernoulli": lambda x, y: torch.bernoulli(x.sigmoid()) * y,
    "overwritten_intermediate": lambda x, y: _overwritten(x, y),
    "clone_zero_": lambda x, y: x.clone().zero_() * y,
    "detached_after_no_grad_update": _detached_after_no_grad_update,
}


def _outputs(out: Any) -> list[T]:
    values = out.values() if isinstance(out, dict) else out if isinstance(out, tuple) else (out,)
    return [o for o in values if isinstance(o, torch.Tensor) and o.requires_grad]


def _none_gradients(function: Callable[[T, T], Any], x: T, y: T, *, zero_is_none: bool = False) -> list[bool]:
    """Which of ``x``, ``y`` get no gradient (``zero_is_none``: or one of zeros) from the sum of the outputs."""
    torch.manual_seed(0)
    outs = _outputs(function(x, y))
    if not outs:
        return [True, True]
    total = torch.stack([o.float().sum() for o in outs]).sum()
    grads = torch.autograd.grad(total, [x, y], allow_unused=True)
    return [g is None or (zero_is_none and not bool(g.any())) for g in grads]


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_reported_exactly_when_thunder_drops_a_gradient_eager_gives(name: str) -> None:
    function = PROGRAMS[name]
    torch.manual_seed(1)
    x, y = torch.randn(3, requires_grad=True), torch.randn(3, requires_grad=True)
    eager = _none_gradients(function, x, y, zero_is_none=True)
    x2, y2 = x.detach().clone().requires_grad_(), y.detach().clone().requires_grad_()
    with audit() as log, use_policy(AUDIT):
        try:
            jitted: list[bool] | None = _none_gradients(thunder.jit(function), x2, y2)
        except Exception:  # noqa: BLE001 - plain Thunder cannot run it: nothing to compare
            jitted = None
    reported = sorted(n for v in log.to_dict()["violations"] if v["kind"] == "gradient-dropped" for n in v["names"])
    dropped = [] if jitted is None else [n for n, e, j in zip("xy", eager, jitted) if j and not e]
    assert reported == dropped


class _Buffers(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.w = torch.nn.Parameter(torch.randn(3))
        self.unused = torch.nn.Parameter(torch.randn(3))
        self.running: T
        self.register_buffer("running", torch.randn(3))

    def forward(self, p: T) -> T:
        self.running.mul_(0.9)
        return p * self.w + self.running


def _updated_under_no_grad(p: T, q: T, *, used: bool = True) -> T:
    with torch.no_grad():
        p.add_(1)  # allowed on a leaf with grad disabled (an optimizer's step): p still requires grad after it
    return p * q if used else q * 2


def _leaves() -> tuple[T, T]:
    return torch.randn(3, requires_grad=True), torch.randn(3, requires_grad=True)


#: (function, inputs from two leaves: (args, kwargs)): inputs passed other than as two tensors.
SHAPES: dict[str, tuple[Callable[..., Any], Callable[[T, T], tuple[tuple[Any, ...], dict[str, Any]]]]] = {
    "same_tensor_twice": (lambda p, q: p * q, lambda a, b: ((a, a), {})),
    "keyword": (lambda p, *, q: p * q, lambda a, b: ((a,), {"q": b})),
    "nested": (lambda ps: ps[0] * ps[1]["k"], lambda a, b: (([a, {"k": b}],), {})),
    "non_leaf": (lambda p, q: p.sin() * q, lambda a, b: ((a * 2, b), {})),
    "module": (_Buffers(), lambda a, b: ((a,), {})),
    "view_of_input": (lambda p, q: (p[1:], q), lambda a, b: ((a, b), {})),
    "input_and_detached": (lambda p, q: (p, q.detach() * 2), lambda a, b: ((a, b), {})),
    "checkpoint": (lambda p, q: torch.utils.checkpoint.checkpoint(lambda t: t.sin() * q, p, use_reentrant=False),
                   lambda a, b: ((a, b), {})),
    "grad_disabled_inside": (lambda p, q: (torch.set_grad_enabled(False), p * q)[1], lambda a, b: ((a, b), {})),
    "complex_input": (lambda p, q: (p * 2).abs() + q,
                      lambda a, b: ((torch.complex(a, a.detach()), b), {})),
    "integer_input": (lambda p, q: p * q, lambda a, b: ((torch.arange(3), b), {})),
    "list_out": (lambda p, q: [p * 2, q * 3], lambda a, b: ((a, b), {})),
    "identity": (lambda p, q: p, lambda a, b: ((a, b), {})),  # Thunder's test_set_grad_enabled with no flips
    "grad_enabled_after_a_flip": (lambda p, q: (torch.set_grad_enabled(False), torch.set_grad_enabled(True), p)[2],
                                  lambda a, b: ((a, b), {})),
    "in_place_on_non_leaf": (lambda p, q: p.add_(1) * 2 + q, lambda a, b: ((a * 1, b), {})),
    # Thunder 0.2.6 and main: the update's output is computed with grad disabled, so p * q has no path back to p
    "leaf_updated_under_no_grad": (_updated_under_no_grad, lambda a, b: ((a, b), {})),
    "leaf_updated_under_no_grad_unused": (lambda p, q: _updated_under_no_grad(p, q, used=False), lambda a, b: ((a, b), {})),
}


def _leaf_grads(function: Callable[..., Any], inputs: Callable[[T, T], tuple[tuple[Any, ...], dict[str, Any]]],
                a: T, b: T) -> list[bool]:
    """Which of the two leaves get no gradient from the sum of what ``function`` returns that requires grad."""
    args, kwargs = inputs(a, b)
    with torch.enable_grad():  # type: ignore[no-untyped-call]
        out = function(*args, **kwargs)
    outs = _outputs(tuple(out) if isinstance(out, list) else out)
    if not outs:
        return [True, True]
    total = torch.stack([o.float().sum() if not o.is_complex() else o.abs().sum() for o in outs]).sum()
    grads = torch.autograd.grad(total, [a, b], allow_unused=True)
    return [g is None for g in grads]


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(SHAPES))
def test_inputs_of_every_shape_are_reported_exactly_when_a_leaf_loses_its_gradient(name: str) -> None:
    function, inputs = SHAPES[name]
    torch.manual_seed(1)
    eager = _leaf_grads(function, inputs, *_leaves())
    with audit() as log, use_policy(AUDIT):
        try:
            jitted: list[bool] | None = _leaf_grads(thunder.jit(function), inputs, *_leaves())
        except Exception:  # noqa: BLE001 - plain Thunder cannot run it: nothing to compare
            jitted = None
        finally:
            torch.set_grad_enabled(True)  # a program that leaves grad disabled leaves it so, as eager does
    reported = [v["names"] for v in log.to_dict()["violations"] if v["kind"] == "gradient-dropped"]
    dropped = jitted is not None and any(j and not e for e, j in zip(eager, jitted))
    assert bool(reported) == dropped, (eager, jitted, reported)
