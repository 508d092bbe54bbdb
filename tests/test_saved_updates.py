"""A value saved for the backward that the forward updates in place afterwards (``handover-mismatch``).

Eager PyTorch is the oracle: each program is reported exactly when Thunder's gradients differ from eager's, so a
Thunder that fixes the class turns the reported ones into failures of this test, not into false alarms. On 0.2.6
and main, ``a = x * 1; a.mul_(y)`` saves ``a`` for ``y``'s gradient and then overwrites it (docs/findings.md 20).
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from typing import Any

import pytest
import torch
from eager_oracle import gradients, inputs, same

from safe_tracectx import use_policy
from safe_tracectx.auditlog.document_types import Violation
from safe_tracectx.errors import BrokenTraceError
from safe_tracectx.hooks import audit, installed
from safe_tracectx.policy import AUDIT
from safe_tracectx.traces.saved_updates import updated_after_saving

with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    import thunder
    from thunder.extend import get_executor

T = torch.Tensor


def _mul_by_a_tensor(x: T, y: T) -> T:
    a = x * 1
    a.mul_(y)  # y's gradient is a from before the update
    return a


def _div_by_a_tensor(x: T, y: T) -> T:
    a = x * 2
    a.div_(y.abs() + 1)
    return a


def _sin_in_place(x: T, y: T) -> T:
    a = x * y
    a.sin_()  # its gradient is cos of a from before the update
    return a


def _square_in_place(x: T, y: T) -> T:
    a = x + y
    a.pow_(2)
    return a * 3


def _gate(x: T, y: T) -> T:
    h = x * 2
    h.mul_(torch.sigmoid(y))  # a gated unit computed in place
    return h.sum(0, keepdim=True) + h


def _exp_in_place(x: T, y: T) -> T:
    a = x * y
    a.exp_()  # its gradient is its output: nothing from before the update is needed
    return a


def _mul_by_a_number(x: T, y: T) -> T:
    a = x * y
    a.mul_(3)
    return a


def _add_then_sin(x: T, y: T) -> T:
    a = x * y
    a.add_(1)
    return a.sin()  # sin saves the updated a, defined after the update


def _update_through_detach(x: T, y: T) -> T:
    a = x * 1
    a.detach().mul_(2)  # the backward hands a to detach's vjp, which reads none of its values
    return a * y


def _detached_gate(x: T, y: T) -> T:
    h = x * 2
    h.mul_(torch.sigmoid(y).detach())  # the backward reads h only on the way to detach's vjp, which gives zeros
    return h + y


def _out_of_place(x: T, y: T) -> T:
    a = x * 1
    return a * y


#: Programs whose backward reads a saved value the forward updated afterwards, on the Thunder of this writing.
UPDATED: dict[str, Callable[[T, T], T]] = {
    "mul_by_a_tensor": _mul_by_a_tensor,
    "div_by_a_tensor": _div_by_a_tensor,
    "sin_in_place": _sin_in_place,
    "square_in_place": _square_in_place,
    "gate": _gate,
}
#: Programs Thunder differentiates as eager does.
AGREEING: dict[str, Callable[[T, T], T]] = {
    "exp_in_place": _exp_in_place,
    "mul_by_a_number": _mul_by_a_number,
    "add_then_sin": _add_then_sin,
    "out_of_place": _out_of_place,
    "update_through_detach": _update_through_detach,
    "detached_gate": _detached_gate,
}


def _inputs() -> tuple[T, T]:
    return inputs((2, 3))


def _gradients(function: Callable[[T, T], T]) -> list[T | None]:
    return gradients(function, (2, 3))


_same = same


def _reported(function: Callable[[T, T], T], **jit_options: Any) -> list[Violation]:
    with audit() as log, use_policy(AUDIT):
        _gradients(thunder.jit(function, **jit_options))
    return [v for v in log.to_dict()["violations"]
            if v["kind"] == "handover-mismatch" and "updates it in place" in v["message"]]


@pytest.mark.parametrize("name", sorted({**UPDATED, **AGREEING}))
def test_reported_exactly_when_thunder_differentiates_other_than_eager(name: str) -> None:
    function = {**UPDATED, **AGREEING}[name]
    thunder_differs = not _same(_gradients(thunder.jit(function)), _gradients(function))
    found = _reported(function)
    assert bool(found) == thunder_differs, (name, thunder_differs, [v["message"] for v in found])
    assert (name in UPDATED) == thunder_differs  # the programs still are what they are listed as


def test_the_report_names_the_saved_value_and_the_update() -> None:
    found = _reported(_mul_by_a_tensor)
    assert len(found) == 1
    message = found[0]["message"]
    saved = found[0]["names"][0]
    assert f"the forward saves {saved} for the backward, then" in message and "(copy_) updates it in place" in message


def test_strict_stops_the_compile_before_the_wrong_gradients() -> None:
    x, y = _inputs()
    with installed("strict"), pytest.raises(BrokenTraceError, match="updates it in place"):
        thunder.jit(_mul_by_a_tensor)(x, y)
    assert x.grad is None and y.grad is None


def test_a_trace_pair_that_saves_nothing_updated_is_silent() -> None:
    jitted = thunder.jit(_add_then_sin)
    x, y = _inputs()
    jitted(x, y).sum().backward()
    assert updated_after_saving(thunder.last_traces(jitted)[-1], thunder.last_backward_traces(jitted)[-1]) == []


class _Gate(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.a, self.b = torch.nn.Linear(4, 4), torch.nn.Linear(4, 4)

    def forward(self, x: T) -> T:
        h: T = self.a(x)
        h.mul_(self.b(x))  # a gated unit computed in place
        return h


def test_an_update_inside_a_fusion_region_is_followed_statement_by_statement() -> None:
    """torch.compile's executor fuses the whole forward: the region saves h and updates it inside."""
    torch.manual_seed(0)
    gate, x = _Gate(), torch.randn(3, 4, requires_grad=True)

    def gradients(module: Any) -> list[T | None]:
        for p in [x, *gate.parameters()]:
            p.grad = None
        module(x).sum().backward()
        return [p.grad.clone() if p.grad is not None else None for p in [x, *gate.parameters()]]

    eager = gradients(gate)
    fusing = get_executor("torchcompile")
    assert fusing is not None
    jitted = thunder.jit(gate, executors=[fusing])
    assert not _same(gradients(jitted), eager)  # Thunder 0.2.6 and main
    with audit() as log, use_policy(AUDIT):
        gradients(thunder.jit(gate, executors=[fusing]))
    found = [v for v in log.to_dict()["violations"] if "updates it in place" in v["message"]]
    assert len(found) == 1 and "(TorchCompile" in found[0]["message"] and "'s copy_ updates it in place" in found[0]["message"]


def _cache_rows(x: T, y: T, *, clone: bool = False) -> T:
    cache = torch.zeros(2, 3)
    cache[0] = x[0]
    first = (y[0] * cache[0]).sum()  # saves row 0 of the cache
    if clone:
        cache = cache.clone()  # what eager needs to accept the program
    cache[1] = y[1] * 2  # writes row 1 only: what was saved is unchanged
    return first + (cache * x).sum()


def test_a_write_into_another_part_of_a_saved_tensors_storage_is_left_alone() -> None:
    """A KV cache's pattern: Thunder's gradients are those of eager with the copy eager needs, and it is not reported."""
    eager = _gradients(lambda x, y: _cache_rows(x, y, clone=True))
    assert _same(_gradients(thunder.jit(_cache_rows)), eager)
    assert _reported(_cache_rows) == []
