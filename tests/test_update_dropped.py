"""update-dropped: the program's in-place update of an input is not in the forward, so the call returns with it as it was.

Eager PyTorch is the oracle: each program runs eagerly and under plain Thunder on equal inputs, and it is
reported exactly when Thunder's call returns with an input other than eager's. On Thunder 0.2.6 and main
an update of a view of an input whose result nothing reads (``with torch.no_grad(): x[0].add_(1)``,
``x[0].add_(1)`` of an input that does not require grad) is moved by the forward/backward split into the
backward, when the program computes something that requires grad: the input is updated only if a
backward runs (never for an inference call, or a cache filled for later calls).
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from typing import Any

import pytest
import torch

from safe_tracectx import STRICT, BrokenTraceError, use_policy
from safe_tracectx.hooks import audit, installed
from safe_tracectx.policy import AUDIT
from safe_tracectx.traces.updated_inputs import dropped_updates, updated_inputs

with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    import thunder

T = torch.Tensor
KIND = "update-dropped"


def row_update_under_no_grad(x: T, y: T) -> T:
    with torch.no_grad():
        x[0].add_(1)
    return y * 2


def diagonal_update_under_no_grad(x: T, y: T) -> T:
    with torch.no_grad():
        x.diagonal().mul_(2)
    return y * 2


def column_update_under_no_grad(x: T, y: T) -> T:
    with torch.no_grad():
        x[:, 0].add_(1)
    return y.sin()


def input_without_grad_updated(x: T, y: T) -> T:
    x[0].add_(1)  # x does not require grad; y does
    return y * 2


def whole_update_under_no_grad(x: T, y: T) -> T:
    with torch.no_grad():
        x.add_(1)
    return y * 2


def update_read_after(x: T, y: T) -> T:
    with torch.no_grad():
        x[0].add_(1)
    return y * x.detach()


def setitem_under_no_grad(x: T, y: T) -> T:
    with torch.no_grad():
        x[0] = 3.0
    return y * 2


def nothing_needs_grad(x: T, y: T) -> T:
    x[0].add_(1)
    return y * 2


#: (program, whether x requires grad, whether y does)
DROPPED = [
    (row_update_under_no_grad, True, True),
    (diagonal_update_under_no_grad, True, True),
    (column_update_under_no_grad, True, True),
    (input_without_grad_updated, False, True),
]
KEPT = [
    (whole_update_under_no_grad, True, True),
    (update_read_after, True, True),
    (setitem_under_no_grad, True, True),
    (nothing_needs_grad, False, False),
]


def _inputs(x_grad: bool, y_grad: bool) -> tuple[T, T]:
    return torch.ones(2, 2, requires_grad=x_grad), torch.ones(2, 2, requires_grad=y_grad)


def _ours(log: Any) -> list[Any]:
    return [v for v in log.to_dict()["violations"] if v["kind"] == KIND]


@pytest.mark.parametrize(("function", "x_grad", "y_grad"), DROPPED + KEPT, ids=lambda p: getattr(p, "__name__", str(p)))
def test_reported_exactly_when_thunder_leaves_an_input_other_than_eager(
    function: Callable[[T, T], T], x_grad: bool, y_grad: bool
) -> None:
    eager = _inputs(x_grad, y_grad)
    function(*eager)
    plain = _inputs(x_grad, y_grad)
    thunder.jit(function)(*plain)
    differs = not all(torch.equal(a.detach(), b.detach()) for a, b in zip(eager, plain))
    audited = _inputs(x_grad, y_grad)
    with audit() as log, use_policy(AUDIT):
        thunder.jit(function)(*audited)
    found = _ours(log)
    assert bool(found) == differs == ((function, x_grad, y_grad) in DROPPED)
    if found:
        assert found[0]["names"] == ["x"]
        assert "so the call returns with x as it was, where eager PyTorch has updated it" in found[0]["message"]
        assert "the backward writes it instead" in found[0]["message"]


def test_strict_raises_before_the_program_runs_naming_the_input_and_the_step_that_dropped_it() -> None:
    x, y = _inputs(True, True)
    with installed(), use_policy(STRICT), pytest.raises(BrokenTraceError) as raised:
        thunder.jit(row_update_under_no_grad)(x, y)
    error = raised.value
    assert error.kind == KIND and error.names == ("x",)
    assert "through its view" in str(error) and "returns with x as it was" in str(error)
    assert "keep every in-place update of a program input" in str(error)
    assert error.culprit is not None and "split" in error.culprit[1]
    assert torch.equal(x.detach(), torch.ones(2, 2))  # reported before the program ran
    assert torch.is_grad_enabled()


def test_the_backward_performs_the_update_so_after_it_the_input_is_eagers() -> None:
    eager, plain = _inputs(True, True), _inputs(True, True)
    row_update_under_no_grad(*eager).sum().backward()  # type: ignore[no-untyped-call]
    out = thunder.jit(row_update_under_no_grad)(*plain)
    assert not torch.equal(plain[0].detach(), eager[0].detach())  # after the call: not updated
    out.sum().backward()
    assert torch.equal(plain[0].detach(), eager[0].detach())  # after the backward: updated


def test_read_directly_from_thunders_traces_the_first_is_the_program_the_last_drops_or_keeps() -> None:
    for function, expected in ((row_update_under_no_grad, ["x"]), (whole_update_under_no_grad, [])):
        jitted = thunder.jit(function)
        jitted(*_inputs(True, True))
        traces = thunder.last_traces(jitted)
        updates = updated_inputs(traces[0])
        assert list(updates) == ["x"]
        found = dropped_updates(traces[-1], updates)
        assert [v.name for v in found] == expected
        assert all("nor does the backward: the update is lost" in v.message for v in found)  # no backward given
        backward = thunder.last_backward_traces(jitted)[-1]
        assert all("the backward writes it instead" in v.message for v in dropped_updates(traces[-1], updates, backward=backward))
        assert dropped_updates(traces[0], updates) == []  # the program itself writes into x


def test_one_tensor_passed_twice_is_written_through_either_name_not_reported() -> None:
    def f(a: T, b: T) -> tuple[T, T]:
        return a.exp_() + b.tanh_(), a  # Thunder's alias step writes through a only (test_update_aliases, #738)

    eager = torch.randn(2, 2)
    audited = eager.clone()
    f(eager, eager)
    with audit() as log, use_policy(AUDIT):
        thunder.jit(f)(audited, audited)
    assert torch.allclose(audited, eager)
    assert _ours(log) == []
