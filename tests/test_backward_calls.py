"""handover-emptied: a backward called again over one graph finds the saved values an earlier call emptied
(#2279's class), checked at each call of the backward Thunder compiled, on real thunder.jit compiles."""

from __future__ import annotations

import warnings
from collections.abc import Callable, Iterator
from typing import Any

import pytest
import torch
from thunder.core.trace import TraceCtx

import safe_tracectx as stc
from safe_tracectx import LENIENT, STRICT, BrokenTraceError, TraceContextWarning, use_policy
from safe_tracectx.hooks import installed
from safe_tracectx.hooks.backward_calls import guard_backward
from safe_tracectx.traces.handover import EmptiedPart, emptied_by_backward, saved_part

with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    import thunder
    import thunder.transforms.autodiff as autodiff


def _scaled_sin(x: torch.Tensor, c: float) -> torch.Tensor:
    return (x.sin() * c).sum()


def _jitted() -> Callable[..., Any]:
    """With symbolic values the scalar ``c`` is saved for the backward, in the second collection (C1)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return thunder.jit(_scaled_sin, cache="symbolic values")


@pytest.fixture
def lists_handed_over(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """#2279's forward/backward split, on this Thunder: the forward returns its saved values as lists (the fix
    made them tuples), which the backward's clear_mutable_collection empties."""
    split = autodiff.split_into_forward_and_backward

    def split_into_forward_and_backward(joint: TraceCtx) -> tuple[TraceCtx, TraceCtx]:
        fw, bw = split(joint)
        ret = fw.bound_symbols[-1]
        output, (tensors, other) = ret.args
        fw.bound_symbols[-1] = ret.from_bsym(args=(output, (list(tensors), list(other))))
        return fw, bw

    monkeypatch.setattr(autodiff, "split_into_forward_and_backward", split_into_forward_and_backward)
    yield


def _twice(jitted: Callable[..., Any]) -> tuple[torch.Tensor, torch.Tensor]:
    """(x, its gradient) after two backwards over one graph."""
    x = torch.randn(3, requires_grad=True)
    out = jitted(x, 2.0)
    out.backward(retain_graph=True)
    out.backward()
    assert x.grad is not None
    return x, x.grad


def test_the_backward_empties_what_it_unpacks_and_the_forward_hands_tuples_on_this_thunder() -> None:
    jitted = _jitted()
    _twice(jitted)
    fw, bw = thunder.last_traces(jitted)[-1], thunder.last_backward_traces(jitted)[-1]
    parts = emptied_by_backward(bw)
    assert [(p.position, p.collection) for p in parts] == [(0, "C0"), (1, "C1")]
    assert "x" in parts[0].names and parts[1].names == ("c",)
    assert isinstance(saved_part(fw, 1), tuple) and saved_part(fw, 2) is None and saved_part(bw, 0) is None


def test_a_second_backward_is_silent_under_strict_when_the_forward_hands_tuples() -> None:
    jitted = _jitted()
    with stc.audit() as log, installed(STRICT):
        x, grad = _twice(jitted)
    torch.testing.assert_close(grad, 2 * 2.0 * x.detach().cos())  # two backwards accumulate
    assert log.violations == []


def test_a_second_backward_over_an_emptied_list_is_raised_before_thunder_fails(lists_handed_over: None) -> None:
    jitted = _jitted()
    with stc.audit() as log, installed(STRICT):
        x = torch.randn(3, requires_grad=True)
        out = jitted(x, 2.0)
        out.backward(retain_graph=True)  # one backward is right
        assert log.violations == []
        with pytest.raises(BrokenTraceError, match=r"handed 0 saved values in C1 where it unpacks 1 \(c\)") as info:
            out.backward()
    error = info.value
    assert error.kind == "handover-emptied" and error.names == ("C1", "c")
    assert error.culprit == ("forward/backward split", "thunder.transforms.autodiff.split_into_forward_and_backward")
    assert "retain_graph=True" in str(error) and "as tuples" in error.fix
    assert [(v.detail["kind"], v.detail["names"]) for v in log.violations] == [("handover-emptied", ["C1", "c"])]


def test_plain_thunder_fails_on_it_and_the_non_raising_modes_report_it_first(lists_handed_over: None) -> None:
    with pytest.raises(ValueError, match="not enough values to unpack"):
        _twice(_jitted())
    with stc.audit() as log, installed(LENIENT):
        with pytest.warns(TraceContextWarning, match="C1"), pytest.raises(ValueError, match="not enough values"):
            _twice(_jitted())
    assert [v.detail["kind"] for v in log.violations] == ["handover-emptied"]


def test_the_check_can_be_switched_off_and_then_leaves_the_backward_as_thunder_made_it(lists_handed_over: None) -> None:
    with stc.audit() as log, installed(STRICT), use_policy(STRICT, handover_emptied="off"):
        with pytest.raises(ValueError, match="not enough values to unpack"):
            _twice(_jitted())
    assert log.violations == []


def test_the_guard_passes_every_call_through_unchanged() -> None:
    calls: list[tuple[Any, ...]] = []

    def backward_fn(saved_for_backward: Any, cotangents: Any) -> str:
        calls.append((saved_for_backward, cotangents))
        return "grads"

    parts = [EmptiedPart(1, "C1", ("c",))]
    guarded = guard_backward(backward_fn, parts, {1: ("my split", "my.split")})
    assert guarded is not backward_fn and guarded.__wrapped__ is backward_fn and guarded.__name__ == "backward_fn"
    given = [[], [2.0]]
    assert guarded(given, ("g",)) == "grads" and calls == [(given, ("g",))]
    assert guarded(None, ()) == "grads"  # not what Thunder hands over: the call itself says what is wrong
    with installed(STRICT), pytest.raises(BrokenTraceError, match="handed 0 saved values in C1") as info:
        guarded([[], []], ())
    assert info.value.culprit == ("my split", "my.split") and len(calls) == 2  # raised before the call


def test_a_backward_called_after_uninstall_is_left_to_thunder(lists_handed_over: None) -> None:
    """The guarded backward stays in Thunder's compile cache; once the hooks are gone it checks nothing (the
    default policy, strict, must not raise for an installation that ended)."""
    jitted = _jitted()
    x = torch.randn(3, requires_grad=True)
    with installed(STRICT):
        out = jitted(x, 2.0)
        out.backward(retain_graph=True)
    with pytest.raises(ValueError, match="not enough values to unpack") as info:
        out.backward()
    assert not isinstance(info.value, stc.TraceContextError)
    with installed(STRICT), pytest.raises(BrokenTraceError, match="handed 0 saved values in C1"):
        out = jitted(x, 2.0)  # the cached backward, checked again under a new installation
        out.backward(retain_graph=True)
        out.backward()


def test_a_collection_of_the_wrong_size_that_is_not_empty_is_left_to_the_call() -> None:
    """Only an emptied collection is this check's finding: one of another size was never emptied by a backward,
    and the message (an earlier call emptied it) would send the user the wrong way."""
    calls: list[Any] = []

    def backward_fn(saved_for_backward: Any, cotangents: Any) -> str:
        calls.append(saved_for_backward)
        return "grads"

    guarded = guard_backward(backward_fn, [EmptiedPart(1, "C1", ("c",))], {1: ("my split", "my.split")})
    with stc.audit() as log, installed(STRICT):
        assert guarded([[], [1.0, 2.0]], ()) == "grads"
    assert log.violations == [] and len(calls) == 1
