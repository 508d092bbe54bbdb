"""dtype-changed-by-substitution: a trace substitution swaps a traced value for a tensor of another dtype (#2626's
class: the grad rule of prims.div recomputed an int64 quotient as a float32 true division), on real thunder.jit."""

from __future__ import annotations

import warnings
from typing import Any

import pytest
import torch
from thunder.core import devices, dtypes, prims
from thunder.core.langctxs import Languages, langctx
from thunder.core.prims import PrimIDs
from thunder.core.proxies import TensorProxy
from thunder.core.trace import TraceCtx, get_tracectx
from thunder.core.trace_interpreter import TraceSubstitutionProcessor
from thunder.executors.torch_compile import torch_compile_ex

import safe_tracectx as stc
from safe_tracectx import STRICT, BrokenTraceError
from safe_tracectx.hooks import installed
from safe_tracectx.policy import AUDIT
from safe_tracectx.traces.substitution import KIND, readers_of, swapped_dtypes

with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    import thunder
    import thunder.core.transforms as transforms

GRAD_TRANSFORM = ("autodiff grad transform", "thunder.transforms.autodiff.grad_transform_on_trace")


def _div_prim_grad(a: Any, b: Any, /) -> Any:
    """The grad rule of prims.div before #2626's fix: the forward recomputed as a true division."""
    fwd = a / b
    g = prims.get_grad(fwd)
    transforms.put_grads((a, b), (g / b, -g * ((a / b) / b)))  # type: ignore[no-untyped-call]
    return fwd


@pytest.fixture
def true_division_grad(monkeypatch: pytest.MonkeyPatch) -> None:
    """Thunder at #2626's parent: integer tensors are differentiated too, and prims.div's forward is ``a / b``."""
    monkeypatch.setitem(transforms._grad_fn_map, PrimIDs.DIV, langctx(Languages.TORCH)(_div_prim_grad))
    monkeypatch.setattr(transforms, "_is_differentiable", lambda a: isinstance(a, TensorProxy))


def fn(a: torch.Tensor, b: torch.Tensor, c: torch.Tensor) -> torch.Tensor:
    return c[torch.div(a, b, rounding_mode="trunc")]


def _inputs() -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    torch.manual_seed(0)
    return torch.randint(1, 5, (5,)), torch.ones(5, dtype=torch.int32), torch.randn(5, 5, requires_grad=True)


@pytest.mark.usefixtures("true_division_grad")
def test_strict_raises_before_thunders_failure_with_names_and_culprit() -> None:
    with stc.audit() as log, installed(STRICT):
        with pytest.raises(BrokenTraceError, match=r"substitutes t\d+ \(f32\[5\]\), the result of prims.div's grad "
                           r"rule _div_prim_grad, for t\d+ \(i64\[5\]\)") as info:
            thunder.jit(fn)(*_inputs())
    error = info.value
    assert error.kind == KIND and len(error.names) == 2
    assert error.culprit == GRAD_TRANSFORM and "prims.div(a, b)" in error.fix
    assert "getitem" in error.message and get_tracectx() is None
    assert [v.detail["kind"] for v in log.violations][:1] == [KIND]


@pytest.mark.usefixtures("true_division_grad")
def test_audit_reports_it_and_thunders_own_error_is_untouched() -> None:
    with stc.audit() as log, installed(AUDIT):
        with pytest.raises(RuntimeError, match="index"):
            thunder.jit(fn)(*_inputs())
    found = [v.detail for v in log.violations if v.detail["kind"] == KIND]
    assert found and "grad_transform_on_trace" in str(found[0]["culprit"])
    assert "_div_prim_grad" in str(found[0]["message"])


@pytest.mark.usefixtures("true_division_grad")
def test_the_check_can_be_switched_to_a_warning_or_off() -> None:
    assert STRICT.replace(dtype_changed_by_substitution="warn").action_of_check(KIND) == "warn"
    with installed(STRICT.replace(dtype_changed_by_substitution="warn")), pytest.warns(Warning, match="_div_prim_grad"):
        with pytest.raises(RuntimeError, match="index"):  # Thunder's own failure, as without us
            thunder.jit(fn)(*_inputs())
    with stc.audit() as log, installed(STRICT.replace(dtype_changed_by_substitution="off")):
        with pytest.raises(RuntimeError, match="index"):
            thunder.jit(fn)(*_inputs())
    assert [v for v in log.violations if v.detail["kind"] == KIND] == []


def test_the_fixed_thunder_and_mixed_dtype_grads_are_silent() -> None:
    def mixed(x: torch.Tensor, y: torch.Tensor, i: torch.Tensor) -> torch.Tensor:
        z = x.to(torch.float16) * y  # a dtype change traced as such
        w = (z.float() + x.double().float()).sum(0)
        return w[i // 2] * x[0].argmax().float() + torch.div(i, 2, rounding_mode="floor").float().sum()

    x = torch.randn(4, 3, requires_grad=True)
    y = torch.randn(4, 3, dtype=torch.float16, requires_grad=True)
    with stc.audit() as log, installed(STRICT):
        thunder.jit(fn)(*_inputs()).sum().backward()
        thunder.jit(mixed)(x, y, torch.tensor([0, 1, 2])).sum().backward()
        # amax's grad sums a bool mask: prims.sum's meta says b8, the torch executor's sum (what runs) says i64
        thunder.jit(lambda a: a.amax(dim=1).sum())(x).backward()
        thunder.jit(lambda a: a.amax(dim=1).sum(), executors=[torch_compile_ex])(x).backward()
    assert x.grad is not None and y.grad is not None
    assert log.violations == []


def _processor() -> tuple[TraceSubstitutionProcessor, TensorProxy, TensorProxy, TensorProxy]:
    trace = TraceCtx()
    with stc.tracectx(trace):
        a = TensorProxy("a", shape=(2,), device=devices.cpu, dtype=dtypes.int64)
        out = TensorProxy("out", shape=(2,), device=devices.cpu, dtype=dtypes.int64)
        trace.args = (a,)
        trace.bound_symbols = [prims.unpack_trivial.bind(a, name="a", output=a), prims.neg.bind(a, output=out),
                               prims.python_return.bind(out, output=None)]
    processor = TraceSubstitutionProcessor(trace)  # type: ignore[no-untyped-call]
    processor.swap_map = {}
    with stc.tracectx(processor.new_trace):
        new = TensorProxy("t0", shape=(2,), device=devices.cpu, dtype=dtypes.float32)
        reshaped = TensorProxy("t1", shape=(1, 2), device=devices.cpu, dtype=dtypes.int64)
    return processor, a, new, reshaped


def test_the_hook_raises_before_the_swap_and_otherwise_calls_thunders_own() -> None:
    processor, a, new, reshaped = _processor()
    names = set(processor.new_trace.names)
    with installed(STRICT), pytest.raises(BrokenTraceError) as info:
        processor.add_to_swap_map(a, new)  # type: ignore[no-untyped-call]
    assert info.value.names == ("t0", "a") and "bound symbol 1 (neg)" in info.value.message
    assert processor.swap_map == {} and set(processor.new_trace.names) == names  # nothing swapped, no name taken
    with stc.audit() as log, installed(STRICT), stc.tracectx(processor.new_trace):  # as Thunder calls it
        assert processor.add_to_swap_map(a, reshaped) is None  # type: ignore[no-untyped-call]
    assert log.violations == [] and len(processor.swap_map) == 1


def test_the_read_only_pieces() -> None:
    processor, a, new, reshaped = _processor()
    assert swapped_dtypes(a, new) == ("i64[2]", "f32[2]") and swapped_dtypes(a, reshaped) is None
    assert swapped_dtypes(a, 2) is None
    assert readers_of(processor.trace, "a") == ["bound symbol 1 (neg)"]
    assert readers_of(processor.trace, "out") == ["bound symbol 2 (python_return)"]
    assert readers_of(processor.trace, "nothing") == []


def test_a_users_patch_made_while_installed_is_kept_at_uninstall() -> None:
    original = TraceSubstitutionProcessor.add_to_swap_map

    def users(self: Any, old: Any, new: Any) -> Any:
        return original(self, old, new)  # type: ignore[no-untyped-call]

    try:
        with installed(STRICT):
            assert TraceSubstitutionProcessor.add_to_swap_map is not original
            TraceSubstitutionProcessor.add_to_swap_map = users  # type: ignore[method-assign]
        assert TraceSubstitutionProcessor.add_to_swap_map is users  # not put back over the user's
        with installed(STRICT):
            assert TraceSubstitutionProcessor.add_to_swap_map.__wrapped__ is users  # type: ignore[attr-defined]
        assert TraceSubstitutionProcessor.add_to_swap_map is users
    finally:
        TraceSubstitutionProcessor.add_to_swap_map = original  # type: ignore[method-assign]
