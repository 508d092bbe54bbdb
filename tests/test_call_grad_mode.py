"""grad-mode-lost: a jitted call returns with PyTorch's grad mode other than the one its program leaves (#2499's class).

Thunder follows ``torch.set_grad_enabled`` inside a jitted function in its compile data
only. Before #2499 no call applied it; on 0.2.6 the compiling call does, a call served from
the cache does not. Plain Thunder is the oracle here: each test first runs the function
without safe-tracectx and compares PyTorch's grad mode after each call with eager's.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Iterator
from typing import Any

import pytest
import torch

from safe_tracectx import LENIENT, STRICT, BrokenTraceError, TraceContextWarning, use_policy
from safe_tracectx.hooks import audit, installed
from safe_tracectx.hooks.call_ends import watched
from safe_tracectx.policy import AUDIT

with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    import thunder
    from thunder.common import CompileStats

CULPRIT = ("thunder.jit's call", "thunder.jit.<locals>.fn_")


@pytest.fixture(autouse=True)
def grad_enabled_after() -> Iterator[None]:
    yield
    torch.set_grad_enabled(True)


def turns_grad_off(x: torch.Tensor) -> torch.Tensor:
    y = x.sin()
    torch.set_grad_enabled(False)
    return y * 2


def turns_grad_off_by_hand(x: torch.Tensor) -> torch.Tensor:
    flag = torch._C._set_grad_enabled(False)  # type: ignore[func-returns-value]  # noqa: F841 - the variable named
    return x * 2


def restores_grad(x: torch.Tensor) -> torch.Tensor:
    with torch.no_grad():
        y = x.sin()
    torch.set_grad_enabled(False)
    torch.set_grad_enabled(True)
    return x.cos() + y


def _stats(jitted: Any) -> Any:
    """The CompileStats of a jitted function (``thunder.compile_stats``)."""
    return jitted._lc_cs


def _modes_after(jitted: Callable[[torch.Tensor], Any], calls: int) -> list[bool]:
    """PyTorch's grad mode after each of ``calls`` calls, each made with grad enabled."""
    x = torch.randn(3, requires_grad=True)
    modes = []
    for _ in range(calls):
        torch.set_grad_enabled(True)
        jitted(x)
        modes.append(torch.is_grad_enabled())
    return modes


def _first_lost(function: Callable[[torch.Tensor], Any], calls: int) -> int:
    """The index of the first call after which plain Thunder's grad mode is not eager's."""
    eager = _modes_after(function, 1)[0]
    lost = [i for i, mode in enumerate(_modes_after(thunder.jit(function), calls)) if mode != eager]
    assert lost, "plain Thunder keeps eager's grad mode here: nothing to catch"
    return lost[0]


def test_strict_raises_at_the_first_call_that_returns_with_another_mode_than_eager() -> None:
    first = _first_lost(turns_grad_off, 3)  # 0 before Thunder's fix of #2499, 1 on 0.2.6 and main (the cache)
    jitted = thunder.jit(turns_grad_off)
    x = torch.randn(3, requires_grad=True)
    with installed(STRICT):
        for _ in range(first):
            torch.set_grad_enabled(True)
            jitted(x)
        torch.set_grad_enabled(True)
        with pytest.raises(BrokenTraceError) as info:
            jitted(x)
        assert torch.is_grad_enabled()  # as Thunder left it: the check reads, it does not set
    error = info.value
    assert error.kind == "grad-mode-lost" and error.culprit == CULPRIT and error.names == ()
    assert "the jitted call of turns_grad_off returns with PyTorch's grad mode enabled" in error.message
    assert "its program leaves it disabled" in error.message
    assert ("served from Thunder's cache" if first else "the call that compiled it") in error.message
    assert "torch._C._set_grad_enabled(False), called by torch's grad-mode API" in error.message
    assert "cd.is_grad_enabled" in error.fix and error.site is not None and error.site.filename == __file__


def test_the_audit_records_it_once_per_program_over_many_calls() -> None:
    first = _first_lost(turns_grad_off, 3)
    jitted = thunder.jit(turns_grad_off)
    with audit() as log, use_policy(AUDIT):
        modes = _modes_after(jitted, 5)
    assert modes == [False] * first + [True] * (5 - first)  # what Thunder does, unchanged
    (violation,) = log.to_dict()["violations"]
    assert violation["kind"] == "grad-mode-lost" and violation["culprit"] == "thunder.jit's call (thunder.jit.<locals>.fn_)"


def test_lenient_warns_and_the_check_can_be_switched_off() -> None:
    _first_lost(turns_grad_off, 3)
    with installed(LENIENT), warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        _modes_after(thunder.jit(turns_grad_off), 3)
    assert [w for w in seen if issubclass(w.category, TraceContextWarning)
            and "returns with PyTorch's grad mode enabled" in str(w.message)]
    with installed(STRICT), use_policy(STRICT, grad_mode_lost="off"):
        _modes_after(thunder.jit(turns_grad_off), 3)  # no error


def test_the_variable_of_an_assigning_line_is_named() -> None:
    first = _first_lost(turns_grad_off_by_hand, 3)
    jitted = thunder.jit(turns_grad_off_by_hand)
    with audit() as log, use_policy(AUDIT):
        _modes_after(jitted, first + 1)
    (violation,) = log.to_dict()["violations"]
    assert violation["names"] == ["flag"]
    assert "`flag = torch._C._set_grad_enabled(False)" in violation["message"]


def test_a_program_that_restores_the_mode_is_not_watched() -> None:
    assert _modes_after(thunder.jit(restores_grad), 2) == [True, True]
    jitted = thunder.jit(restores_grad)
    with audit() as log, use_policy(STRICT):
        assert _modes_after(jitted, 3) == [True, True, True]
        assert type(_stats(jitted)) is CompileStats  # not watched
    assert log.to_dict()["violations"] == []


def test_a_call_made_with_grad_disabled_runs_an_entry_of_its_own() -> None:
    """Called with grad disabled, the program leaves it disabled: nothing changes, nothing is watched for it."""
    jitted = thunder.jit(turns_grad_off)
    x = torch.randn(3)
    with installed(STRICT):
        for _ in range(3):
            with torch.no_grad():
                jitted(x)
                assert not torch.is_grad_enabled()
        assert type(_stats(jitted)) is CompileStats  # not watched


def test_uninstalling_gives_the_compile_stats_their_class_back_and_a_new_installation_watches_again() -> None:
    first = _first_lost(turns_grad_off, 3)
    jitted = thunder.jit(turns_grad_off)
    with installed(AUDIT):
        before = watched()
        _modes_after(jitted, 1)
        assert type(_stats(jitted)) is not CompileStats and isinstance(_stats(jitted), CompileStats)
        assert watched() == before + 1
    stats = _stats(jitted)
    assert type(stats) is CompileStats and watched() == 0  # nothing is watched while nothing is installed
    assert stats.last_computation is not None  # what Thunder stored is still there
    _modes_after(jitted, 2)  # nothing installed: nothing checked, nothing raised
    with audit() as log, use_policy(AUDIT):  # compiled under the earlier installation, watched again
        assert type(_stats(jitted)) is not CompileStats
        _modes_after(jitted, 1)
    lost = [v for v in log.to_dict()["violations"] if v["kind"] == "grad-mode-lost"]
    assert len(lost) == 1 and first in (0, 1)  # each installation says it once


def test_a_copy_of_watched_compile_stats_is_thunders_own_class() -> None:
    import copy

    jitted = thunder.jit(turns_grad_off)
    with installed(AUDIT):
        _modes_after(jitted, 1)
        duplicate = copy.copy(_stats(jitted))
        assert type(duplicate) is CompileStats and duplicate.last_computation is _stats(jitted).last_computation
        assert _stats(jitted).__reduce_ex__(2)[1] == (CompileStats,)  # pickled as Thunder's class too


def sinc_under_no_grad(x: torch.Tensor) -> torch.Tensor:
    with torch.no_grad():
        sinc = x.sinc()  # Thunder has no sinc: the splitter cuts the no_grad region across modules
    return x + 1 + sinc


def test_of_a_thunderfx_split_only_the_last_module_is_judged() -> None:
    """thunder_0 (`_set_grad_enabled(False)` alone) loses its mode on a cache hit, but inductor_1 sets the mode it
    runs in: the caller gets thunder_2's, which is right (Thunder's own test_no_grad_region_split)."""
    from thunder.dynamo import thunderfx

    x = torch.randn(4, requires_grad=True)
    with installed(STRICT):
        compiled = thunderfx(sinc_under_no_grad)
        for _ in range(3):
            torch.set_grad_enabled(True)
            assert compiled(x).requires_grad and torch.is_grad_enabled()


def sets_the_mode_it_is_given(x: torch.Tensor, index: torch.Tensor, enabled: bool) -> torch.Tensor:
    torch.set_grad_enabled(enabled)
    return x[index]


def test_a_call_that_raised_after_compiling_leaves_nothing_for_another_entry() -> None:
    """A compile whose call raises (x[9] of a 5-element x) must not lend what its program leaves to a later call
    of another cache entry."""
    a, b = torch.randn(3, requires_grad=True), torch.randn(5, requires_grad=True)
    jitted = thunder.jit(sets_the_mode_it_is_given)
    with installed(STRICT):
        for x, index, enabled in ((a, 1, False), (a, 1, True)):
            torch.set_grad_enabled(True)
            jitted(x, torch.tensor([index]), enabled)
        torch.set_grad_enabled(True)
        with pytest.raises(IndexError):
            jitted(b, torch.tensor([9]), False)
        torch.set_grad_enabled(True)
        jitted(a, torch.tensor([1]), True)  # the (a, True) entry: it leaves grad enabled, and so does the call
        assert torch.is_grad_enabled()


def flip_grad_mode() -> None:
    torch.set_grad_enabled(not torch.is_grad_enabled())


def flips_twice(x: torch.Tensor) -> torch.Tensor:
    flip_grad_mode()
    y = x * 2
    flip_grad_mode()  # eager: back to the start mode; Thunder reads PyTorch's mode, still the start mode, and flips it off
    return y


def test_a_marker_made_after_the_mode_left_the_start_is_not_taken_for_eagers() -> None:
    """Inside a jitted function torch.is_grad_enabled() reads PyTorch's mode: the second flip's marker says False where
    eager's says True. The program's mode is unknown then, and nothing is judged (no false alarm on the calls whose
    mode is eager's)."""
    jitted = thunder.jit(flips_twice)
    with audit() as log, use_policy(STRICT):
        _modes_after(jitted, 3)  # no error
        assert type(_stats(jitted)) is CompileStats
    assert log.to_dict()["violations"] == []


def sin_then_off_then_sinc(x: torch.Tensor) -> torch.Tensor:
    y = x.sin()
    torch.set_grad_enabled(False)
    return y.sinc()  # no Thunder sinc: thunder_0 (sin, the mode off), inductor_1 (sinc)


def test_a_thunderfx_module_followed_by_what_inductor_compiled_is_judged() -> None:
    """torch._inductor's module restores the mode it was called in: thunder_0's is the one the caller gets."""
    from thunder.dynamo import thunderfx

    x = torch.randn(4, requires_grad=True)
    plain = thunderfx(sin_then_off_then_sinc)
    modes = []
    for _ in range(2):
        torch.set_grad_enabled(True)
        plain(x)
        modes.append(torch.is_grad_enabled())
    assert True in modes, "plain Thunder keeps eager's grad mode (disabled) here: nothing to catch"
    with audit() as log, use_policy(AUDIT):
        compiled = thunderfx(sin_then_off_then_sinc)
        for _ in range(2):
            torch.set_grad_enabled(True)
            compiled(x)
    (violation,) = log.to_dict()["violations"]
    assert violation["kind"] == "grad-mode-lost" and "the ThunderFX split module thunder_0" in violation["message"]
    site = violation["site"]  # the user's code (the function Dynamo runs), past torch's frames and FX's generated code
    assert site is not None and site["file"].endswith("test_call_grad_mode.py")
    assert site["function"] == "sin_then_off_then_sinc"
