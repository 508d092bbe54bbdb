"""update-grad-mode: an update the program makes with grad disabled, written into a leaf with grad enabled.

Under ``torch.no_grad()`` eager PyTorch allows an in-place update of a leaf that requires
grad (weight initialization, an optimizer's step). Thunder's ``copy_`` carries the grad mode
it was made in, and the torch executor's ``copy_`` refuses a write into such a leaf with
grad enabled, with eager's error. Before #2052, functionalization wrote the update of a view
back into the leaf with a new ``copy_`` marked with the compile's mode, so the program failed
where eager runs (history case pr2052-nograd-leaf). Here a Transform does the same to a
program Thunder 0.2.6 gets right, and plain Thunder shows the failure.
"""

from __future__ import annotations

import warnings
from typing import Any

import pytest
import torch

from copy_rewrites import RewritesCopies

from safe_tracectx import STRICT, BrokenTraceError, use_policy
from safe_tracectx.hooks import audit, installed
from safe_tracectx.policy import AUDIT
from safe_tracectx.traces.updated_inputs import update_modes, wrong_update_modes

with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    import thunder

T = torch.Tensor
KIND = "update-grad-mode"


def step(p: T, w: T) -> T:
    with torch.no_grad():
        p.mul_(2)  # allowed by eager: grad is disabled here
    return w * p.detach()


def view_step(p: T, w: T) -> T:
    with torch.no_grad():
        p.view(-1).mul_(2)  # through a view: the executor's Tensor.view in the trace about to run
    return w * p.detach()


def slice_step(p: T, w: T) -> T:
    with torch.no_grad():
        p[1:].mul_(2)
    return w * p.detach()


def step_with_grad(p: T, w: T) -> T:
    p = p * 1
    p.mul_(2)
    return w * p


class CopiesWithGrad(RewritesCopies):
    """Marks every ``copy_`` of the forward ``grad_enabled=True``: the mode of the compile, not the update's."""

    def rewrite(self, copy: Any) -> Any:
        return copy.from_bsym(kwargs={**copy.kwargs, "grad_enabled": True})


def _inputs(p_grad: bool = True) -> tuple[T, T]:
    return torch.ones(2, 3, requires_grad=p_grad), torch.ones(2, 3, requires_grad=True)


def test_plain_thunder_refuses_the_update_eager_allows_once_the_mode_is_changed() -> None:
    step(*_inputs())  # eager runs it
    thunder.jit(step)(*_inputs())  # and Thunder, as it is
    with pytest.raises(RuntimeError, match="leaf Variable that requires grad"):
        thunder.jit(step, transforms=[CopiesWithGrad()])(*_inputs())


@pytest.mark.parametrize("function", [step, view_step, slice_step])
def test_strict_raises_before_the_program_runs_naming_the_leaf_and_the_step(function: Any) -> None:
    function(*_inputs())  # eager runs it
    with pytest.raises(RuntimeError, match="leaf Variable that requires grad"):
        thunder.jit(function, transforms=[CopiesWithGrad()])(*_inputs())
    p, w = _inputs()
    with installed(), use_policy(STRICT), pytest.raises(BrokenTraceError) as raised:
        thunder.jit(function, transforms=[CopiesWithGrad()])(p, w)
    error = raised.value
    assert error.kind == KIND and error.names == ("p",)
    assert "with grad disabled" in str(error) and "grad_enabled=True" in str(error)
    assert "write an update back with the grad mode of the copy_ it replaces" in str(error)
    assert error.culprit is not None and "RewritesCopies.transform_trace_post_optimization" in error.culprit[1]
    assert torch.equal(p.detach(), torch.ones(2, 3))  # reported before the program ran
    assert torch.is_grad_enabled()


@pytest.mark.parametrize(("function", "p_grad", "transforms"), [
    (step, True, False),  # Thunder keeps the update's mode
    (view_step, True, False),
    (slice_step, True, False),
    (step, False, True),  # p requires no grad: the executor's copy_ refuses nothing
    (step_with_grad, True, True),  # the update was made with grad enabled (p is not a leaf there)
])
def test_silent_where_the_program_runs_as_eager(function: Any, p_grad: bool, transforms: bool) -> None:
    jitted = thunder.jit(function, transforms=[CopiesWithGrad()] if transforms else [])
    with audit() as log, use_policy(AUDIT):
        jitted(*_inputs(p_grad))
    assert [v for v in log.to_dict()["violations"] if v["kind"] == KIND] == []


def test_read_from_the_traces_the_interpretations_modes_and_the_wrong_write() -> None:
    plain = thunder.jit(step)
    plain(*_inputs())
    program = thunder.last_traces(plain)[0]
    assert update_modes(program) == {"p": {False}}
    assert wrong_update_modes(thunder.last_traces(plain)[-1], {"p": {False}}, {"p"}) == []
    changed = thunder.jit(step, transforms=[CopiesWithGrad()])
    with pytest.raises(RuntimeError):
        changed(*_inputs())
    last = thunder.last_traces(changed)[-1]
    assert update_modes(last) == {"p": {True}}
    assert [v.name for v in wrong_update_modes(last, {"p": {False}}, {"p"})] == ["p"]
    assert wrong_update_modes(last, {"p": {False}}, set()) == []  # not a leaf requiring grad at the call
    assert wrong_update_modes(last, {"p": {False, True}}, {"p"}) == []  # the program also updates it with grad
