"""leaf-updated-in-place: a jitted call updates a leaf that requires grad in place, which eager PyTorch refuses (#1652's class).

Eager PyTorch is the oracle: each program is run eagerly first, and it is reported exactly
when eager raises "a leaf Variable that requires grad is being used in an in-place
operation" and plain Thunder runs it. Thunder 0.2.6 and main enforce the rule for most
updates themselves (its torch executor's ``copy_`` raises); an update of a view of the leaf
whose result the program does not use again (``x[0].add_(1)``, ``x.diagonal().mul_(2)``)
still runs silently: it drops the update where eager raises.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from typing import Any

import pytest
import torch

from safe_tracectx import STRICT, BrokenTraceError, use_policy
from safe_tracectx.hooks import audit, installed
from safe_tracectx.hooks.call_ends import watched
from safe_tracectx.hooks.leaf_updates import KIND
from safe_tracectx.policy import AUDIT

with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    import thunder
    from thunder.common import CompileStats

T = torch.Tensor
CULPRIT = "thunder_general_jit"


def row_add(x: T, y: T) -> T:
    x[0].add_(1)
    return y * 2


def diagonal_mul(x: T, y: T) -> T:
    x.diagonal().mul_(2)
    return y * 2


def hsplit_part_add(x: T, y: T) -> T:
    torch.hsplit(x, 2)[0].add_(1)  # an ordinary view for eager's leaf rule (split's and unbind's have their own)
    return y * 2


def whole_view_mul(x: T, y: T) -> T:
    x[...].mul_(2)
    return y + 1


@torch.no_grad()
def _helper(p: T) -> None:
    p[0].add_(1)


def decorated_helper_in_no_grad(x: T, y: T) -> T:
    with torch.no_grad():
        _helper(x)  # its exit restores what its entry read: PyTorch's mode while Thunder traces, not eager's
        x[1].add_(1)
    return y * 2


def enable_grad_inside_no_grad(x: T, y: T) -> T:
    with torch.no_grad():
        with torch.enable_grad():  # type: ignore[no-untyped-call]
            pass
        x[0].add_(1)
    return y * 2


def in_inference_mode(x: T, y: T) -> T:
    with torch.inference_mode():  # Thunder records no marker for it
        x[0].add_(1)
    return y * 2


def set_grad_disabled(x: T, y: T) -> T:
    with torch.set_grad_enabled(False):
        x[0].add_(1)
    return y * 2


def under_no_grad(x: T, y: T) -> T:
    with torch.no_grad():
        x[0].add_(1)  # an optimizer's step: eager allows it
    return y * 2


def detached_update(x: T, y: T) -> T:
    x.detach()[0].add_(1)  # eager allows an update through detach()
    return y * 2


def updates_y(x: T, y: T) -> T:
    y[0].add_(1)  # y does not require grad
    return x * y


def reads_only(x: T, y: T) -> T:
    return x[0] * y


def list_index_copies(x: T, y: T) -> T:
    x[[0, 1]].add_(1)  # advanced indexing: a copy, not a view
    return y * 2


def to_with_copy(x: T, y: T) -> T:
    x.to(torch.float32, copy=True).add_(1)
    return y * 2


def view_as_another_dtype(x: T, y: T) -> T:
    x.view(torch.int32).add_(1)  # no gradient flows through it: eager allows the update
    return y * 2


def multiplied_by_one(x: T, y: T) -> T:
    with torch.no_grad():
        x[0].mul_(1)
    return y * 2


#: Programs eager refuses that plain Thunder (0.2.6, main) runs, and programs both run.
REFUSED = [row_add, diagonal_mul, whole_view_mul, hsplit_part_add]
ALLOWED = [under_no_grad, detached_update, updates_y, reads_only, decorated_helper_in_no_grad,
           enable_grad_inside_no_grad, in_inference_mode, set_grad_disabled, list_index_copies, to_with_copy,
           view_as_another_dtype, multiplied_by_one]


def _stats(jitted: Any) -> Any:
    """The CompileStats of a jitted function."""
    return jitted._lc_cs


def _inputs() -> tuple[T, T]:
    return torch.ones(2, 2, requires_grad=True), torch.ones(2, 2)


def _eager_refuses(function: Callable[[T, T], T]) -> bool:
    try:
        function(*_inputs())
    except RuntimeError as error:
        assert "leaf Variable" in str(error), error
        return True
    return False


def _audited(function: Callable[..., T], *args: Any) -> list[Any]:
    with audit() as log, use_policy(AUDIT):
        function(*args)
    return _ours(log)


def _ours(log: Any) -> list[Any]:
    return [v for v in log.to_dict()["violations"] if v["kind"] == KIND]


@pytest.mark.parametrize("function", REFUSED + ALLOWED, ids=lambda f: f.__name__)
def test_reported_exactly_when_eager_refuses_the_update_and_plain_thunder_runs_it(function: Callable[[T, T], T]) -> None:
    refused = _eager_refuses(function)
    thunder.jit(function)(*_inputs())  # plain Thunder runs each of them
    found = _audited(thunder.jit(function), *_inputs())
    assert bool(found) == refused == (function in REFUSED)
    if found:
        assert found[0]["names"] == ["x"] and found[0]["message"].endswith("(when the jitted call returns)")


def test_strict_raises_when_the_call_returns_naming_the_leaf_its_view_and_the_step_that_recorded_it() -> None:
    x, y = _inputs()
    # Thunder also drops this update before it runs (update-dropped, raised first under STRICT): off here
    with installed(), use_policy(STRICT.replace(update_dropped="ignore")), pytest.raises(BrokenTraceError) as raised:
        thunder.jit(row_add)(x, y)
    error = raised.value
    assert error.kind == KIND and error.names == ("x",)
    assert "updates its input x through its view" in str(error) and "a leaf tensor that requires grad" in str(error)
    assert "leaf Variable that requires grad is being used in an in-place operation" in str(error)
    assert "torch.no_grad()" in str(error)  # the fix
    assert error.culprit is not None and CULPRIT in error.culprit[1]
    assert "the call returned where eager raises" in str(error)


def test_a_leaf_that_is_not_updated_with_grad_enabled_is_not_watched() -> None:
    with installed(), use_policy(AUDIT):
        jitted = thunder.jit(under_no_grad)
        jitted(*_inputs())
        assert type(_stats(jitted)) is CompileStats  # its CompileStats keep Thunder's class: nothing runs at its end
        watching = thunder.jit(row_add)
        watching(*_inputs())
        assert type(_stats(watching)) is not CompileStats


def test_an_input_that_is_not_a_leaf_is_not_reported_and_a_later_call_with_a_leaf_is() -> None:
    jitted = thunder.jit(row_add)
    with audit() as log, use_policy(AUDIT):
        base = torch.ones(2, 2, requires_grad=True)
        jitted(base * 1, torch.ones(2, 2))  # not a leaf: eager allows it
        first = _ours(log)
        jitted(*_inputs())  # the same cache entry, now with a leaf
        second = _ours(log)
    assert thunder.cache_misses(jitted) == 1
    assert first == [] and len(second) == 1


def test_an_input_that_is_a_view_of_a_leaf_that_requires_grad_is_reported() -> None:
    leaf = torch.ones(3, 2, requires_grad=True)
    with pytest.raises(RuntimeError, match="view of a leaf Variable"):
        row_add(leaf[1:], torch.ones(2, 2))  # eager refuses it
    found = _audited(thunder.jit(row_add), torch.ones(3, 2, requires_grad=True)[1:], torch.ones(2, 2))
    assert len(found) == 1 and found[0]["names"] == ["x"]


def test_an_input_that_is_one_of_unbinds_views_updated_in_place_is_judged_without_an_internal_error() -> None:
    def updates(x: T, y: T) -> T:
        x.add_(1)
        return y * 2

    parameter = torch.nn.Parameter(torch.ones(2, 4))
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)  # "could not check the end of a jitted call" would raise
        assert _audited(thunder.jit(updates), parameter.unbind(0)[0], torch.ones(4)) == []


def test_once_per_program_and_installation() -> None:
    jitted = thunder.jit(diagonal_mul)
    with audit() as log, use_policy(AUDIT):
        for _ in range(3):
            jitted(*_inputs())
    assert len(_ours(log)) == 1
    assert len(_audited(jitted, *_inputs())) == 1  # a new installation says it again


def test_called_with_grad_disabled_nothing_is_reported() -> None:
    with torch.no_grad():
        assert _audited(thunder.jit(row_add), *_inputs()) == []


def test_uninstalling_gives_thunder_its_compile_stats_class_back() -> None:
    jitted = thunder.jit(row_add)
    with audit(), use_policy(AUDIT):
        jitted(*_inputs())
        assert type(_stats(jitted)) is not CompileStats and watched() >= 1
    assert type(_stats(jitted)) is CompileStats and watched() == 0
    jitted(*_inputs())  # not installed: nothing watched, nothing raised


def test_where_thunder_raises_eagers_error_itself_nothing_is_added() -> None:
    def used(x: T, y: T) -> T:
        x.mul_(2)
        return x * y

    with audit() as log, use_policy(AUDIT), pytest.raises(RuntimeError, match="leaf Variable"):
        thunder.jit(used)(*_inputs())
    assert _ours(log) == []
