"""cache-entry-reused: a cache entry compiled for one dtype argument runs a call that passes another (docs/findings.md 23).

Eager PyTorch is the oracle: each reported program is first run by plain Thunder, whose
second call must return another dtype than eager's (so a Thunder that guards dtype arguments
fails these tests loudly rather than leaving the check to false-alarm). Thunder 0.2.6 and main
bake a dtype argument into the computation trace as a literal and never check it in the
prologue; a ``torch.device`` argument is checked (a new cache entry), so nothing is reported.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from typing import Any

import pytest
import torch

from safe_tracectx import STRICT, BrokenTraceError, use_policy
from safe_tracectx.hooks import audit, installed
from safe_tracectx.hooks.cache_reuse import CULPRIT, KIND
from safe_tracectx.policy import AUDIT
from safe_tracectx.traces.baked_values import MISSING, key, typed_leaves, value_at

with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    import thunder
    from thunder.common import CompileStats
    from thunder.core.jit_ext import JitCtx

T = torch.Tensor
Calls = tuple[tuple[tuple[Any, ...], dict[str, Any]], tuple[tuple[Any, ...], dict[str, Any]]]


def to_dtype(x: T, dt: torch.dtype) -> T:
    return x.to(dt) * 2


def zeros_of(x: T, dt: torch.dtype) -> T:
    return torch.zeros(3, dtype=dt) + x


def keyword_only(x: T, *, dtype: torch.dtype) -> T:
    return x.to(dtype=dtype) + 1


def from_options(x: T, opts: dict[str, Any]) -> T:
    scaled: T = x.to(opts["dt"]) * opts["scale"]
    return scaled


def from_list(x: T, dts: list[torch.dtype]) -> T:
    return x.to(dts[1]) * 2


def unused(x: T, dt: torch.dtype) -> T:
    return x * 2


def to_device(x: T, d: torch.device) -> T:
    return x.to(d) * 2


def _stats(jitted: Any) -> Any:
    """The CompileStats of a jitted function."""
    return jitted._lc_cs


def _x() -> T:
    return torch.ones(3)


#: Programs plain Thunder runs with the first call's dtype at the second call, and the path reported.
REUSED: list[tuple[Callable[..., T], Calls, str]] = [
    (to_dtype, (((_x(), torch.float64), {}), ((_x(), torch.float16), {})), "args[1]"),
    (zeros_of, (((_x(), torch.float64), {}), ((_x(), torch.bfloat16), {})), "args[1]"),
    (keyword_only, (((_x(),), {"dtype": torch.float64}), ((_x(),), {"dtype": torch.float16})), "kwargs['dtype']"),
    (from_options, (((_x(), {"dt": torch.float64, "scale": 2}), {}), ((_x(), {"dt": torch.float16, "scale": 2}), {})),
     "args[1]['dt']"),
    (from_options, (((_x(),), {"opts": {"dt": torch.float64, "scale": 2}}),
                    ((_x(),), {"opts": {"dt": torch.float16, "scale": 2}})), "kwargs['opts']['dt']"),
    (from_list, (((_x(), [torch.float32, torch.float64]), {}), ((_x(), [torch.float32, torch.bfloat16]), {})),
     "args[1][1]"),
]


def _ours(log: Any) -> list[Any]:
    return [v for v in log.to_dict()["violations"] if v["kind"] == KIND]


def _two_calls(function: Callable[..., T], calls: Calls) -> tuple[list[Any], list[T]]:
    jitted = thunder.jit(function)
    with audit() as log, use_policy(AUDIT):
        results = [jitted(*args, **kwargs) for args, kwargs in calls]
    return _ours(log), results


@pytest.mark.parametrize(("function", "calls", "path"), REUSED, ids=lambda v: getattr(v, "__name__", None) or "")
def test_reported_where_plain_thunder_returns_another_dtype_than_eager(
    function: Callable[..., T], calls: Calls, path: str
) -> None:
    eager = [function(*args, **kwargs) for args, kwargs in calls]
    plain = thunder.jit(function)
    results = [plain(*args, **kwargs) for args, kwargs in calls]
    assert results[0].dtype == eager[0].dtype
    assert results[1].dtype != eager[1].dtype  # Thunder reused the entry: if it fails, Thunder guards dtypes now
    assert thunder.cache_misses(plain) == 1
    found, audited = _two_calls(function, calls)
    assert [r.dtype for r in audited] == [r.dtype for r in results]  # the audit changes nothing
    assert len(found) == 1 and found[0]["names"] == [path]
    assert found[0]["culprit"] is not None and "JitCtx.proxify" in str(found[0]["culprit"])
    message = found[0]["message"]
    assert f"compiled for {path}=" in message and "prologue does not check that argument" in message
    assert message.endswith("(when the jitted call returns)")


def test_strict_raises_naming_the_argument_both_dtypes_the_prologue_and_the_fix() -> None:
    jitted = thunder.jit(to_dtype)
    with installed(), use_policy(STRICT):
        assert jitted(_x(), torch.float64).dtype == torch.float64  # the compiling call: nothing to say
        with pytest.raises(BrokenTraceError) as raised:
            jitted(_x(), torch.float16)
    error = raised.value
    assert error.kind == KIND and error.names == ("args[1]",)
    text = str(error)
    assert "compiled for args[1]=torch.float64 ran for torch.float16" in text
    assert "prologue does not check that argument" in text and "computes what the compiling call asked for" in text
    assert "check_literal_like" in error.fix and "jf(x.to(dt))" in error.fix
    assert error.culprit == CULPRIT and callable(getattr(JitCtx, "proxify", None))  # the culprit exists in Thunder
    assert error.site is not None and error.site.filename == __file__


def test_a_module_whose_forward_takes_a_dtype_is_reported_by_its_class() -> None:
    class Cast(torch.nn.Module):
        def forward(self, x: T, dt: torch.dtype) -> T:
            return x.to(dt) + 1

    jitted = thunder.jit(Cast())
    with audit() as log, use_policy(AUDIT):
        jitted(_x(), torch.float64)
        assert jitted(_x(), torch.float16).dtype == torch.float64
    found = _ours(log)
    assert len(found) == 1 and "the module " in found[0]["message"] and "Cast" in found[0]["message"]


def test_the_same_dtype_again_is_not_reported() -> None:
    found, results = _two_calls(to_dtype, (((_x(), torch.float64), {}), ((_x(), torch.float64), {})))
    assert found == [] and all(r.dtype == torch.float64 for r in results)


def test_an_unused_dtype_argument_is_not_watched_nor_reported() -> None:
    jitted = thunder.jit(unused)
    with audit() as log, use_policy(AUDIT):
        jitted(_x(), torch.float64)
        assert type(_stats(jitted)) is CompileStats  # nothing runs at the end of its calls
        jitted(_x(), torch.float16)
    assert _ours(log) == []


def test_a_device_argument_thunder_checks_compiles_a_new_entry_and_is_not_reported() -> None:
    jitted = thunder.jit(to_device)
    with audit() as log, use_policy(AUDIT):
        jitted(_x(), torch.device("cpu"))
        assert jitted(_x(), torch.device("meta")).device.type == "meta"
    assert thunder.cache_misses(jitted) == 2 and _ours(log) == []


def test_a_call_that_compiles_a_new_entry_for_its_own_dtype_is_not_reported() -> None:
    jitted = thunder.jit(to_dtype)
    with audit() as log, use_policy(AUDIT):
        jitted(torch.ones(3), torch.float64)
        assert jitted(torch.ones(4), torch.float16).dtype == torch.float16  # another shape: a new cache entry
    assert thunder.cache_misses(jitted) == 2 and _ours(log) == []


def test_calls_made_without_the_hooks_are_not_judged() -> None:
    jitted = thunder.jit(to_dtype)
    with installed(), use_policy(STRICT):
        jitted(_x(), torch.float64)
        assert type(_stats(jitted)) is not CompileStats
    assert type(_stats(jitted)) is CompileStats  # Thunder's class back: nothing runs at the call's end
    with use_policy(STRICT):
        assert jitted(_x(), torch.float16).dtype == torch.float64  # the bug, unwatched: nothing raised


def test_once_per_program_and_installation() -> None:
    jitted = thunder.jit(to_dtype)
    with audit() as log, use_policy(AUDIT):
        jitted(_x(), torch.float64)
        for _ in range(3):
            jitted(_x(), torch.float16)
    assert len(_ours(log)) == 1
    with audit() as again, use_policy(AUDIT):
        jitted(_x(), torch.float16)  # a program compiled under an earlier installation is watched again
    assert len(_ours(again)) == 1


class _Trap(dict):  # type: ignore[type-arg]
    """A dict whose own methods must never run."""

    def __getitem__(self, key: Any) -> Any:
        raise AssertionError("user __getitem__ ran")

    def items(self) -> Any:
        raise AssertionError("user items ran")

    def __iter__(self) -> Any:
        raise AssertionError("user __iter__ ran")


def test_the_call_is_read_without_running_the_users_container_methods_nor_keeping_its_values() -> None:
    trap = _Trap(dt=torch.float16)
    found = typed_leaves((torch.ones(1), (trap, [torch.device("cpu")])), {"n": 3})
    assert {path: k for path, (_, k) in found.items()} == {
        "args[1][0]['dt']": ("dtype", "torch.float16"), "args[1][1][0]": ("device", "cpu")}
    steps = found["args[1][0]['dt']"][0]
    assert key(value_at((None, (_Trap(dt=torch.float32), [])), {}, steps)) == ("dtype", "torch.float32")
    assert value_at((None, ()), {}, steps) is MISSING and value_at((None, ([],)), {}, steps) is MISSING
    loop: list[Any] = [torch.float64]
    loop.append(loop)  # a list holding itself
    assert [p for p in typed_leaves((loop,), {})] == ["args[0][0]"]


def _ignores_dt_beside_an_inputs_dtype(x: torch.Tensor, dt: torch.dtype) -> torch.Tensor:
    return torch.zeros(3, dtype=x.dtype) + x  # float32 is a literal, for x's sake


def _ignores_dt_beside_a_literal(x: torch.Tensor, dt: torch.dtype) -> torch.Tensor:
    return x + torch.ones(3, dtype=torch.float32)


def _converts_and_drops(x: torch.Tensor, dt: torch.dtype) -> torch.Tensor:
    _ = x.to(dt)  # dead: dead-code elimination removes it from the program that runs
    return x * 2


@pytest.mark.parametrize(
    "function", [_ignores_dt_beside_an_inputs_dtype, _ignores_dt_beside_a_literal, _converts_and_drops],
    ids=lambda f: f.__name__,
)
def test_a_dtype_argument_the_program_that_runs_does_not_bake_in_is_not_reported(function: Any) -> None:
    x = torch.ones(3)
    first = torch.float32 if function is not _converts_and_drops else torch.float64
    eager = [function(x, dt) for dt in (first, torch.float16)]
    jitted = thunder.jit(function)
    with installed(), use_policy(STRICT):
        got = [jitted(x, dt) for dt in (first, torch.float16)]
    assert all(torch.equal(a, b) and a.dtype == b.dtype for a, b in zip(got, eager))  # Thunder is right here
