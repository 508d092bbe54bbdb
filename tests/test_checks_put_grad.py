"""gradient-mismatch at ``prims.put_grad``: the grad transform ``thunder.jit`` runs associates each gradient with
its primal through put_grad, whose meta rejects another shape or dtype with shapes and no names. #1979's class: the
grad rule of copy_with_setitem summed a broadcast value's gradient over the leading dimensions only, so value
f32[1, 3] was put a f32[3, 3] gradient. Real thunder.jit compiles, with the parent's rule put back."""

from __future__ import annotations

import warnings
from typing import Any

import pytest
import torch
from thunder.core import devices, dtypes, prims
from thunder.core.langctxs import Languages, langctx
from thunder.core.proxies import TensorProxy
from thunder.core.trace import TraceCtx, get_tracectx

import safe_tracectx as stc
from safe_tracectx import STRICT, BrokenTraceError
from safe_tracectx.hooks import install, installed, uninstall
from safe_tracectx.hooks.gradients import _rejected
from safe_tracectx.policy import AUDIT

with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    import thunder
    import thunder.core.transforms

transforms: Any = thunder.core.transforms


def _copy_with_setitem_grad(a: Any, index: Any, value: Any) -> Any:
    """copy_with_setitem's grad rule as it was before #1979's fix (thunder/core/transforms.py)."""
    fwd = prims.copy_with_setitem(a, index, value)
    g = transforms.get_grad(fwd)
    transforms.put_grad(a, prims.copy_with_setitem(g, index, 0))
    if isinstance(value, TensorProxy):
        value_grad = g[index]
        expanded_dims = value_grad.ndim - value.ndim
        if expanded_dims > 0:
            value_grad = prims.sum(value_grad, tuple(range(expanded_dims)))
        transforms.put_grad(value, value_grad)
    return fwd


@pytest.fixture
def parents_rule(monkeypatch: pytest.MonkeyPatch) -> None:
    wrapped = langctx(Languages.TORCH)(_copy_with_setitem_grad)
    monkeypatch.setitem(transforms._grad_fn_map, prims.PrimIDs.COPY_WITH_SETITEM, wrapped)


def bcast_fn(a: torch.Tensor, value: torch.Tensor) -> torch.Tensor:
    a = a.clone()
    a[..., :3] = value
    return a * 2


def _inputs() -> tuple[torch.Tensor, torch.Tensor]:
    return torch.randn(5, 3, 5, requires_grad=True), torch.randn(1, 3, requires_grad=True)


@pytest.mark.usefixtures("parents_rule")
def test_strict_raises_with_the_primal_the_gradient_and_the_rule_before_thunders_meta() -> None:
    with stc.audit() as log, installed(STRICT):
        with pytest.raises(BrokenTraceError, match=r"put_grad is given the gradient (t\d+) for value with shape "
                           r"\[3, 3\] where the primal's is \[1, 3\]; the grad rule _copy_with_setitem_grad") as info:
            thunder.jit(bcast_fn)(*_inputs())
    error = info.value
    assert error.kind == "gradient-mismatch" and error.names[1] == "value"
    assert error.culprit == ("the grad rule _copy_with_setitem_grad", f"{__name__}._copy_with_setitem_grad")
    assert error.__context__ is None  # raised before Thunder's "Shapes were expected to be the same"
    assert get_tracectx() is None
    assert [(v.detail["kind"], v.detail["names"]) for v in log.violations] == [("gradient-mismatch", list(error.names))]


@pytest.mark.usefixtures("parents_rule")
def test_the_audit_mode_records_it_and_thunders_own_failure_follows_untouched() -> None:
    with stc.audit() as log, installed(AUDIT):
        with pytest.raises(RuntimeError, match="Shapes were expected to be the same") as info:
            thunder.jit(bcast_fn)(*_inputs())
    assert not isinstance(info.value, stc.TraceContextError)
    assert [v.detail["kind"] for v in log.violations] == ["gradient-mismatch"]
    assert get_tracectx() is None


@pytest.mark.usefixtures("parents_rule")
def test_switched_off_the_check_leaves_thunders_failure_alone() -> None:
    with stc.audit() as log, installed(STRICT.replace(gradient_mismatch="off")):
        with pytest.raises(RuntimeError, match="Shapes were expected to be the same"):
            thunder.jit(bcast_fn)(*_inputs())
    assert log.violations == []


def test_thunders_fixed_rule_is_silent_and_computes_what_torch_does() -> None:
    a, value = _inputs()
    with stc.audit() as log, installed(STRICT):
        out = thunder.jit(bcast_fn)(a, value)
        loss: Any = out.sum()
        loss.backward()
    assert log.violations == []
    ea, ev = a.detach().clone().requires_grad_(), value.detach().clone().requires_grad_()
    expected: Any = bcast_fn(ea, ev).sum()
    expected.backward()
    assert a.grad is not None and value.grad is not None and ea.grad is not None and ev.grad is not None
    torch.testing.assert_close((out, a.grad, value.grad), (bcast_fn(ea, ev), ea.grad, ev.grad))


def _tensor(name: str, shape: tuple[int, ...], dtype: Any = dtypes.float32) -> TensorProxy:
    return TensorProxy(name, shape=shape, device=devices.cpu, dtype=dtype)


def test_only_what_thunders_meta_rejects_is_reported() -> None:
    with stc.tracectx(TraceCtx()):
        value, ids = _tensor("value", (1, 3)), _tensor("ids", (4,), dtypes.int64)
        wide, scalar = _tensor("wide", (3, 3)), _tensor("scalar", ())
        same, half = _tensor("same", (1, 3)), _tensor("half", (1, 3), dtypes.bfloat16)
        as_int = _tensor("as_int", (1, 3), dtypes.int64)
    assert _rejected(value, wide) == "shape [3, 3] where the primal's is [1, 3]"
    assert _rejected(value, as_int) == "dtype int64 where the primal's is float32"
    assert _rejected(value, same) is None
    assert _rejected(ids, _tensor_like(ids)) is None  # Thunder ignores an integer primal's gradient
    assert _rejected(value, scalar) is None  # a CPU scalar tensor's shape is not compared by the meta
    assert _rejected(value, half) is None  # another float width: Thunder rejects it, the check does not claim it
    assert _rejected(value, 2.0) is None


def _tensor_like(ids: TensorProxy) -> Any:
    with stc.tracectx(TraceCtx()):
        return _tensor("g", tuple(ids.shape))


def test_the_meta_is_put_back_and_the_symbol_keeps_its_hash_and_equality() -> None:
    original, before = prims.put_grad.meta, hash(prims.put_grad)
    install(STRICT)
    try:
        assert prims.put_grad.meta is not original and prims.put_grad.meta.__wrapped__ is original
        assert hash(prims.put_grad) == before and prims.put_grad == prims.put_grad
    finally:
        uninstall()
    assert prims.put_grad.meta is original


def test_a_meta_someone_replaced_meanwhile_is_left_in_place() -> None:
    original = prims.put_grad.meta

    def theirs(grad_for: Any, grad: Any) -> None:
        original(grad_for, grad)

    install(STRICT)
    try:
        object.__setattr__(prims.put_grad, "meta", theirs)
    finally:
        uninstall()
    try:
        assert prims.put_grad.meta is theirs
    finally:
        object.__setattr__(prims.put_grad, "meta", original)
