"""grad-mode-unrecorded: a grad-mode change the program asks for that the trace does not record (#1282's class).

On 0.2.6 and main Thunder's ``torch._C._set_grad_enabled`` is a symbol that records a
``set_grad_enabled`` marker. Before the no_grad regions were supported it was a function that
only warned (``register_function(torch._C._set_grad_enabled, _set_grad_enabled_with_warning)``),
and the ThunderFX splitter handed Thunder the ``no_grad`` regions of Dynamo's graphs (#1282).
``older_mapping`` puts that function back in the real Thunder installed here, exactly as
that Thunder built its lookaside, and eager PyTorch is the oracle: each test first shows
that plain Thunder computes another gradient than eager.
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
    from thunder.core import jit_ext
    from thunder.core.interpreter import interpreter_needs_wrap
    from thunder.torch import _torch_to_thunder_function_map

MAP = jit_ext._general_jit_lookaside_map


def _set_grad_enabled_with_warning(enabled: bool) -> None:
    warnings.warn("torch.enable_grad/torch.no_grad/torch._C._set_grad_enabled have no effect under thunder.jit")


@pytest.fixture
def older_mapping() -> Iterator[None]:
    """Thunder's mapping of torch._C._set_grad_enabled as it was before the no_grad regions were supported."""
    lookaside, mapped = MAP[torch._C._set_grad_enabled], _torch_to_thunder_function_map[torch._C._set_grad_enabled]
    _torch_to_thunder_function_map[torch._C._set_grad_enabled] = _set_grad_enabled_with_warning
    located = jit_ext.record_source_loc_in_symbol_header(_set_grad_enabled_with_warning)  # type: ignore[no-untyped-call]
    MAP[torch._C._set_grad_enabled] = jit_ext.ensure_recursive_proxies(  # type: ignore[no-untyped-call]
        interpreter_needs_wrap(located))  # type: ignore[no-untyped-call]
    try:
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", message="torch.enable_grad/torch.no_grad")
            yield
    finally:
        MAP[torch._C._set_grad_enabled], _torch_to_thunder_function_map[torch._C._set_grad_enabled] = lookaside, mapped


CULPRIT = ("Thunder's torch._C._set_grad_enabled", f"{__name__}._set_grad_enabled_with_warning")


def region(x: torch.Tensor) -> torch.Tensor:
    with torch.no_grad():
        y = x @ x
    return y + x


def dead_region(x: torch.Tensor) -> torch.Tensor:
    with torch.no_grad():
        unused = x @ x  # noqa: F841 - computed and dropped: Thunder's DCE removes it
    return x * 2


def enabled_region(x: torch.Tensor) -> torch.Tensor:
    with torch.enable_grad():  # type: ignore[no-untyped-call]
        y = x * 3
    return y


def _grad(function: Callable[[torch.Tensor], torch.Tensor], grad: bool = True) -> Any:
    x = torch.arange(9.0).reshape(3, 3).requires_grad_()
    with torch.set_grad_enabled(grad):
        out = function(x)
    if not out.requires_grad:
        return None
    out.sum().backward()  # type: ignore[no-untyped-call]
    return x.grad


def _plain_differs(function: Callable[[torch.Tensor], torch.Tensor], grad: bool = True) -> None:
    eager, jitted = _grad(function, grad), _grad(thunder.jit(function), grad)
    if eager is None or jitted is None:
        assert (eager is None) != (jitted is None), "plain Thunder computes eager's (no gradient at all)"
    else:
        assert not torch.allclose(eager, jitted), "plain Thunder computes eager's gradient"


def test_strict_raises_before_the_backward_naming_the_region_output(older_mapping: None) -> None:
    _plain_differs(region)
    jitted = thunder.jit(region)
    with installed(STRICT), pytest.raises(BrokenTraceError) as info:
        jitted(torch.ones(3, 3, requires_grad=True))
    error = info.value
    assert error.kind == "grad-mode-unrecorded" and error.culprit == CULPRIT and "y" in error.names
    assert "where the program has grad disabled (torch._C._set_grad_enabled(False) at" in error.message
    assert f"{__file__}:" in error.message  # the user's `with` line, not torch's grad-mode API
    assert "the trace's grad mode there is not the program's" in error.message
    assert "differentiates it as if grad were enabled" in error.message
    assert "set_grad_enabled marker" in error.fix and "#1282" in error.fix
    assert torch.is_grad_enabled()


def test_the_audit_records_it_and_thunder_runs_as_it_would(older_mapping: None) -> None:
    jitted = thunder.jit(region)
    with audit() as log, use_policy(AUDIT):
        x = torch.ones(3, 3, requires_grad=True)
        jitted(x).sum().backward()
    (violation,) = [v for v in log.to_dict()["violations"] if v["kind"] == "grad-mode-unrecorded"]
    assert "y" in violation["names"] and violation["culprit"] == f"{CULPRIT[0]} ({CULPRIT[1]})"
    assert x.grad is not None and not torch.allclose(x.grad, _grad(region))  # Thunder's answer, unchanged


def test_a_region_thunder_drops_or_that_reads_nothing_needing_grad_is_not_reported(older_mapping: None) -> None:
    with audit() as log, use_policy(STRICT):
        thunder.jit(dead_region)(torch.ones(3, 3, requires_grad=True))
        thunder.jit(region)(torch.ones(3, 3))  # no input requires grad: eager and Thunder agree
    assert log.to_dict()["violations"] == []


def test_an_enable_grad_region_of_a_call_made_without_grad_is_reported(older_mapping: None) -> None:
    _plain_differs(enabled_region, grad=False)
    with installed(STRICT), pytest.raises(BrokenTraceError) as info, torch.no_grad():
        thunder.jit(enabled_region)(torch.ones(3, requires_grad=True))
    assert info.value.kind == "grad-mode-unrecorded" and "y" in info.value.names
    assert "where the program has grad enabled" in info.value.message and "gets no gradient" in info.value.message


def test_the_recorded_changes_of_this_thunder_are_silent() -> None:
    jitted = thunder.jit(region)
    with audit() as log, use_policy(STRICT):
        x = torch.ones(3, 3, requires_grad=True)
        jitted(x).sum().backward()
    assert log.to_dict()["violations"] == []
    assert x.grad is not None and torch.allclose(x.grad, _grad(region))


def test_installing_wraps_the_lookaside_and_removing_puts_thunders_back() -> None:
    lookaside = MAP[torch._C._set_grad_enabled]
    with installed(STRICT):
        assert MAP[torch._C._set_grad_enabled] is not lookaside
        assert MAP[torch._C._set_grad_enabled].__wrapped__ is lookaside
    assert MAP[torch._C._set_grad_enabled] is lookaside
    with installed(STRICT):
        theirs = MAP[torch._C._set_grad_enabled] = lambda *args, **kwargs: lookaside(*args, **kwargs)
    assert MAP[torch._C._set_grad_enabled] is theirs  # someone else's replacement is left in place
    MAP[torch._C._set_grad_enabled] = lookaside


def test_a_thunderfx_region_is_charged_to_the_splitter(older_mapping: None) -> None:
    from thunder.dynamo import ThunderCompiler

    torch._dynamo.reset()
    compiled = torch.compile(region, backend=ThunderCompiler())  # type: ignore[no-untyped-call]
    with installed(STRICT), pytest.raises(BrokenTraceError) as info:
        compiled(torch.ones(3, 3, requires_grad=True))
    torch._dynamo.reset()
    error = info.value
    assert error.kind == "grad-mode-unrecorded" and error.culprit == ("ThunderFX splitter", "thunder.dynamo.splitter._splitter")
    assert "y" in error.names and "the ThunderFX splitter handed Thunder this grad-mode region of FX graph" in error.message


def inference_region(x: torch.Tensor) -> torch.Tensor:
    with torch.inference_mode():
        y = x @ x
    return y + x


NO_LOOKASIDE = ("Thunder's interpretation of torch.inference_mode", "thunder.core.jit_ext.general_jit_lookaside")


def test_an_inference_mode_region_is_reported_on_this_thunder() -> None:
    """A real bug of Thunder 0.2.6 and main: torch.inference_mode() inside a jitted function records nothing."""
    _plain_differs(inference_region)
    with installed(STRICT), pytest.raises(BrokenTraceError) as info:
        thunder.jit(inference_region)(torch.ones(3, 3, requires_grad=True))
    error = info.value
    assert error.kind == "grad-mode-unrecorded" and error.culprit == NO_LOOKASIDE and "y" in error.names
    assert f"where the program has grad disabled (torch.inference_mode(), in effect at {__file__}:" in error.message
    assert "Thunder has no lookaside for torch.inference_mode" in error.message
    assert "enter inference mode around the jitted call" in error.fix
    assert not torch.is_inference_mode_enabled() and torch.is_grad_enabled()


def test_inference_mode_around_the_call_or_over_nothing_needing_grad_is_silent() -> None:
    with audit() as log, use_policy(STRICT):
        with torch.inference_mode():
            thunder.jit(inference_region)(torch.ones(3, 3))
        thunder.jit(inference_region)(torch.ones(3, 3))  # nothing requires grad: eager and Thunder agree
        thunder.jit(region)(torch.ones(3, 3, requires_grad=True))  # the next compile of the thread starts afresh
    assert log.to_dict()["violations"] == []


def no_grad_then_inference(x: torch.Tensor) -> torch.Tensor:
    with torch.no_grad():
        s = x.sum()
    with torch.inference_mode():
        y = x @ x
    return y + x + s


def no_grad_inside_inference(x: torch.Tensor) -> torch.Tensor:
    with torch.inference_mode():
        with torch.no_grad():  # its exit reads PyTorch's mode, disabled: Thunder records False twice
            a = x * 2
    return x * 3 + a


@pytest.mark.parametrize("function", [no_grad_then_inference, no_grad_inside_inference])
def test_a_region_after_another_or_inside_one_is_judged(function: Callable[[torch.Tensor], torch.Tensor]) -> None:
    _plain_differs(function)
    with installed(STRICT), pytest.raises(BrokenTraceError) as info:
        thunder.jit(function)(torch.ones(3, 3, requires_grad=True))
    assert info.value.kind == "grad-mode-unrecorded"
    assert torch.is_grad_enabled()  # strict raised before Thunder's call set the mode its markers leave


def inference_mask(x: torch.Tensor) -> torch.Tensor:
    with torch.inference_mode():
        m = x > 4  # a bool tensor: no gradient either way
    return x + m.float()


def inference_detached(x: torch.Tensor) -> torch.Tensor:
    with torch.inference_mode():
        y = x * 2
    return x + y.detach()  # no gradient reaches the output through y


def inference_zeros(x: torch.Tensor) -> torch.Tensor:
    with torch.inference_mode():
        z = torch.zeros_like(x)  # its value does not depend on x
    return x + z


class RunningMean(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.linear = torch.nn.Linear(3, 3)
        self.stat: torch.Tensor
        self.register_buffer("stat", torch.zeros(3))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        with torch.inference_mode():
            self.stat.mul_(0.9).add_(x.mean(0))  # statistics only: handed back as an input updated in place
        return self.linear(x)  # type: ignore[no-any-return]


def inference_positions(x: torch.Tensor) -> torch.Tensor:
    with torch.inference_mode():
        positions = torch.arange(3).to(x)  # x gives only its dtype and device
    return x + positions  # an inference tensor may not be saved for backward (x * positions fails in eager)


def inference_causal_bias(x: torch.Tensor) -> torch.Tensor:
    with torch.inference_mode():
        bias = x.new_zeros(4, 4).masked_fill(torch.ones(4, 4, dtype=torch.bool).triu(1), float("-inf"))
    return torch.softmax(x @ x.T + bias, -1) @ x


def inference_sign(x: torch.Tensor) -> torch.Tensor:
    with torch.inference_mode():
        s = torch.sign(x)  # a zero gradient
    return x * 2 + s


class Distill(torch.nn.Module):
    """The region's values reach the output only through a torch.no_grad() region Thunder records."""

    def __init__(self) -> None:
        super().__init__()
        self.teacher, self.student = torch.nn.Linear(3, 3), torch.nn.Linear(3, 3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        with torch.inference_mode():
            t = self.teacher(x)
        with torch.no_grad():
            target = t.softmax(-1)
        return -(target * self.student(x).log_softmax(-1)).sum(-1)  # type: ignore[no-any-return]


@pytest.mark.parametrize("function", [inference_mask, inference_detached, inference_zeros, RunningMean,
                                      inference_positions, inference_causal_bias, inference_sign, Distill])
def test_a_region_whose_values_take_no_gradient_to_the_output_is_silent(function: Any) -> None:
    """Working programs: Thunder computes eager's values and gradients although it does not record the region."""
    torch.manual_seed(0)
    eager = function() if isinstance(function, type) else function
    torch.manual_seed(0)
    jitted = thunder.jit(function() if isinstance(function, type) else function)
    x = torch.randn(4, 3, requires_grad=True)
    y = x.detach().clone().requires_grad_()
    eager(x).sum().backward()
    with audit() as log, use_policy(STRICT):
        jitted(y).sum().backward()
    assert log.to_dict()["violations"] == []
    assert x.grad is not None and y.grad is not None and torch.allclose(x.grad, y.grad)


class Scale(torch.autograd.Function):
    @staticmethod
    def forward(ctx: Any, t: torch.Tensor) -> torch.Tensor:
        return t * 2

    @staticmethod
    def backward(ctx: Any, grad: torch.Tensor) -> torch.Tensor:
        return grad * 2


def region_with_a_custom_function(x: torch.Tensor) -> torch.Tensor:
    with torch.inference_mode():
        y = x @ x
        s = Scale.apply(x.detach())  # type: ignore[no-untyped-call]  # Thunder traces its forward and backward in traces of their own meanwhile
    return y + x + s  # type: ignore[no-any-return]


class TeacherUpdate(torch.nn.Module):
    """A buffer updated in place in the region from a parameter, then read in the output."""

    def __init__(self) -> None:
        super().__init__()
        self.student = torch.nn.Linear(3, 3)
        self.teacher: torch.Tensor
        self.register_buffer("teacher", torch.zeros(3, 3))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        with torch.inference_mode():
            self.teacher.mul_(0.5).add_(self.student.weight, alpha=0.5)
        return ((self.student(x) - x @ self.teacher.T) ** 2).mean(-1)  # type: ignore[no-any-return]


def test_a_region_with_a_custom_function_or_an_in_place_update_read_later_is_reported() -> None:
    _plain_differs(region_with_a_custom_function)
    with installed(STRICT), pytest.raises(BrokenTraceError) as info:
        thunder.jit(region_with_a_custom_function)(torch.ones(3, 3, requires_grad=True))
    assert "y" in info.value.names
    torch.manual_seed(0)
    eager = TeacherUpdate()
    torch.manual_seed(0)
    module = TeacherUpdate()
    jitted = thunder.jit(module)
    x = torch.randn(4, 3)
    eager(x).sum().backward()
    jitted(x).sum().backward()
    assert eager.student.weight.grad is not None and module.student.weight.grad is not None
    assert not torch.allclose(eager.student.weight.grad, module.student.weight.grad)  # plain Thunder differs
    with installed(STRICT), pytest.raises(BrokenTraceError) as info:
        torch.manual_seed(0)
        thunder.jit(TeacherUpdate())(x)
    assert info.value.kind == "grad-mode-unrecorded"


def test_inference_mode_around_a_call_then_inside_the_next_compile_is_reported() -> None:
    with installed(STRICT):
        with torch.inference_mode():
            thunder.jit(lambda t: t * 2)(torch.ones(2))
        with pytest.raises(BrokenTraceError):
            thunder.jit(inference_region)(torch.ones(3, 3, requires_grad=True))


def enable_grad_inside(x: torch.Tensor) -> torch.Tensor:
    with torch.enable_grad():  # type: ignore[no-untyped-call]
        y = x * 3
    return y


def test_enable_grad_inside_a_call_made_in_inference_mode_is_reported() -> None:
    """Eager gives an inference tensor that does not require grad; Thunder records the enable_grad and
    differentiates."""
    x = torch.ones(3, requires_grad=True)
    with torch.inference_mode():
        assert not enable_grad_inside(x).requires_grad and thunder.jit(enable_grad_inside)(x).requires_grad
    with installed(STRICT), pytest.raises(BrokenTraceError) as info, torch.inference_mode():
        thunder.jit(enable_grad_inside)(x)
    assert "torch.inference_mode() around the jitted call" in info.value.message


def test_each_thread_follows_its_own_inference_mode() -> None:
    import threading

    errors: list[BaseException] = []
    entered, compiled = threading.Event(), threading.Event()

    def holds_inference_mode() -> None:
        with torch.inference_mode():  # this thread's mode only, its symbol calls too
            thunder.jit(lambda t: t * 2)(torch.ones(2))
            entered.set()
            compiled.wait(60)

    other = threading.Thread(target=holds_inference_mode)
    with installed(STRICT):
        other.start()
        entered.wait(60)
        try:
            thunder.jit(region)(torch.ones(3, 3, requires_grad=True))  # recorded no_grad: silent
            with pytest.raises(BrokenTraceError):
                thunder.jit(inference_region)(torch.ones(3, 3, requires_grad=True))
        except BaseException as error:  # noqa: BLE001 - kept for the assertion after the thread ends
            errors.append(error)
        finally:
            compiled.set()
            other.join(60)
    assert errors == []
