"""gradient-mismatch: a cotangent or gradient in Thunder's VJP backward pass whose dtype kind or shape is not its
primal's (#1878's class: amax's grad_chooser_backward returned a float32 gradient for an int64 input, and the next
grad rule's pad rejected it), on real thunder.jit compiles with the parent's rule put back."""

from __future__ import annotations

import warnings
from typing import Any

import pytest
import torch
from thunder.core import devices, dtypes, prims
from thunder.core.proxies import TensorProxy
from thunder.core.trace import TraceCtx, get_tracectx

import safe_tracectx as stc
from safe_tracectx import STRICT, BrokenTraceError
from safe_tracectx.hooks import installed
from safe_tracectx.policy import AUDIT
from safe_tracectx.traces.gradients import mismatch, mismatches, rule_name

with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    import thunder
    import thunder.core.transforms

transforms: Any = thunder.core.transforms
    

_ORIGINAL: Any = transforms.backward_impls[prims.PrimIDs.AMIN]


def grad_chooser_backward(primal: Any, x: Any, x_shape: Any, reduced_dims: Any, g: Any) -> Any:
    """amin's rule made wrong as #1878's parent was (a gradient of another kind than its primal): int64 for f32."""
    return prims.convert_element_type(_ORIGINAL(primal, x, x_shape, reduced_dims, g), dtypes.int64)


@pytest.fixture
def wrong_rule(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(transforms.backward_impls, prims.PrimIDs.AMIN, grad_chooser_backward)


def g(x: torch.Tensor) -> torch.Tensor:
    return (x.amin(0) * 2).sum()


def _vjp() -> Any:
    """Thunder's VJP of ``g`` (as thunder/tests/test_grad.py's check_vjp traces it: backward_pass runs)."""
    return thunder.trace()(transforms.vjp(g), (torch.randn(3, 4),), (torch.tensor(1.0),))


@pytest.mark.usefixtures("wrong_rule")
def test_a_gradient_of_another_kind_is_raised_under_strict_before_the_next_rule_reads_it() -> None:
    with stc.audit() as log, installed(STRICT):
        with pytest.raises(BrokenTraceError, match=r"backward_pass is handed the cotangent t\d+ for the output t\d+ "
                           r"with dtype int64 where the primal's is float32") as info:
            _vjp()
    error = info.value
    assert error.kind == "gradient-mismatch" and len(error.names) == 2
    assert "convert_element_type" in error.fix
    assert get_tracectx() is None  # Thunder's own finally blocks reset what it set
    assert [(v.detail["kind"], v.detail["names"]) for v in log.violations] == [("gradient-mismatch", list(error.names))]


@pytest.mark.usefixtures("wrong_rule")
def test_the_audit_mode_reports_it_once_and_the_trace_is_made_as_thunder_makes_it() -> None:
    with stc.audit() as log, installed(AUDIT):
        trace = _vjp()
    assert trace is not None
    assert [v.detail["kind"] for v in log.violations] == ["gradient-mismatch"]  # once, not at each enclosing level
    assert get_tracectx() is None


@pytest.mark.usefixtures("wrong_rule")
def test_the_check_can_be_switched_to_a_warning_or_off() -> None:
    assert STRICT.action_of_check("gradient-mismatch") is None and STRICT.broken_trace == "raise"
    warned = STRICT.replace(gradient_mismatch="warn")
    assert warned.action_of_check("gradient-mismatch") == "warn"
    with installed(warned), pytest.warns(Warning, match="gradient must have its primal's dtype"):
        _vjp()
    with stc.audit() as log, installed(STRICT.replace(gradient_mismatch="off")):
        _vjp()
    assert log.violations == []


def f(x: torch.Tensor, ids: torch.Tensor) -> torch.Tensor:
    """Thunder's test_max_with_int (issue #1857)."""
    x + x
    return ids[0].max()


def _inputs() -> tuple[torch.Tensor, torch.Tensor]:
    return torch.rand([2, 2], requires_grad=True), torch.randint(0, 10, size=(1, 512))


def test_thunders_own_rules_are_silent_int_inputs_mixed_precision_and_shapes() -> None:
    def mixed(x: torch.Tensor, w: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        y = x.to(torch.bfloat16) @ w  # bf16 compute, f32 input
        return (y.float() + b).amax(dim=0).sum() + (y * b.to(torch.bfloat16)).sum().float()

    def broadcast(x: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        return (x * b + x.sum(0)).amax(dim=1).sum()

    x = torch.randn(3, 4, requires_grad=True)
    w = torch.randn(4, 5, dtype=torch.bfloat16, requires_grad=True)
    b = torch.randn(5, requires_grad=True)
    with stc.audit() as log, installed(STRICT):
        assert thunder.jit(f)(*_inputs()).dtype == torch.int64
        _vjp()
        thunder.trace()(transforms.vjp(f), _inputs(), (torch.tensor(1),))
        thunder.jit(mixed)(x, w, b).backward()
        thunder.jit(broadcast)(x, torch.randn(4, requires_grad=True)).backward()
        thunder.jit(lambda a, i: a[i].sum())(x, torch.tensor([0, 2])).backward()
        # a CPU scalar tensor's gradient is the other operand's shape; vjp sums it back (test_vjp_correctness_add)
        thunder.trace()(transforms.vjp(lambda a, s: a + s), (torch.randn(4, 4), torch.tensor(2.0)),
                        (torch.ones(4, 4),))
        # the user's cotangents: a float one for argmax's int output (never read), an int one for a float output
        thunder.trace()(transforms.vjp(lambda a: (a.sin(), a.argmax(0))), (torch.randn(3, 4),),
                        (torch.ones(3, 4), torch.zeros(4)))
        thunder.trace()(transforms.vjp(lambda a: a.sin()), (torch.randn(3, 4),), (torch.ones(3, 4, dtype=torch.int64),))
    assert w.grad is not None and w.grad.dtype == torch.bfloat16
    assert log.violations == []


def _tensor(name: str, shape: Any, dtype: Any) -> TensorProxy:
    return TensorProxy(name, shape=shape, device=devices.cpu, dtype=dtype)


def test_what_counts_dtype_kind_and_plain_shapes_sum_to_cannot_reduce() -> None:
    with stc.tracectx(TraceCtx()) as trace:
        i = _tensor("i", (4,), dtypes.int64)
        flag = _tensor("flag", (4,), dtypes.bool8)
        f32, bf16 = _tensor("f32", (4,), dtypes.float32), _tensor("bf16", (4,), dtypes.bfloat16)
        c64 = _tensor("c64", (4,), dtypes.complex64)
        wide = _tensor("wide", (2, 4), dtypes.float32)
        odd, scalar = _tensor("odd", (3,), dtypes.float32), _tensor("scalar", (), dtypes.float32)
        names_before = set(trace.names)
    assert mismatch(i, f32) == "dtype float32 where the primal's is int64"
    assert mismatch(flag, f32) is not None and mismatch(c64, f32) is not None and mismatch(f32, c64) is not None
    assert mismatch(bf16, f32) is None and mismatch(f32, bf16) is None  # another float width: not counted
    assert mismatch(wide, f32) == "shape [4] where the primal's is [2, 4]"  # sum_to cannot make [2, 4] of it
    assert mismatch(f32, odd) == "shape [3] where the primal's is [4]"
    assert mismatch(f32, wide) == "shape [2, 4] where the primal's is [4]"  # an expand: summed back, doubled
    assert mismatch(scalar, wide) is None  # a CPU scalar tensor's: vjp sums it back
    assert mismatch(f32, None) is None and mismatch(3, f32) is None and mismatch(f32, f32) is None
    # lined up as backward_pass returns them: nested sequences, a kwargs dict, constants
    found = mismatches((i, [f32, 2], {"k": bf16}), (f32, [odd, None], {"k": i}))
    assert [(p.name, g.name) for p, g, _ in found] == [("i", "f32"), ("f32", "odd"), ("bf16", "i")]
    assert set(trace.names) == names_before  # nothing named, nothing created


def test_symbolic_dimensions_are_never_compared() -> None:
    with stc.tracectx(TraceCtx()):
        f32 = _tensor("f32", (4,), dtypes.float32)
        other = _tensor("other", (4,), dtypes.float32)
    other._shape = (object(),)  # type: ignore[attr-defined]  # a symbolic dimension: it must not be compared (nor touched)
    assert mismatch(f32, other) is None


def test_a_rule_is_named_with_the_backward_helper_it_hands_its_work_to() -> None:
    assert rule_name(transforms._grad_fn_map[prims.PrimIDs.AMAX]) == "_amax_prim_grad via grad_chooser_backward"
    assert rule_name(transforms.backward_impls[prims.PrimIDs.AMIN]) == "grad_chooser_backward"


def test_the_hooks_are_put_back() -> None:
    original, decomposed = transforms.backward_pass, transforms.decomposed_fn_backward_rule
    with installed(STRICT):
        assert transforms.backward_pass is not original and getattr(transforms.backward_pass, "__wrapped__") is original
        assert transforms.decomposed_fn_backward_rule is not decomposed
    assert transforms.backward_pass is original and transforms.decomposed_fn_backward_rule is decomposed
