"""Enter/exit, the hot path under install(), check_trace scaling, and lint against ast.parse."""

from __future__ import annotations

import ast
from collections.abc import Callable
from pathlib import Path

import pytest
from bench_config import ROUNDS
from pytest_benchmark.fixture import BenchmarkFixture
from thunder.core import prims
from thunder.core.devices import cpu
from thunder.core.dtypes import float32
from thunder.core.proxies import TensorProxy
from thunder.core.trace import TraceCtx, detached_trace, get_tracectx, reset_tracectx, set_tracectx
from thunder.core.trace import tracectx as thunder_tracectx

from safe_tracectx import scratch_trace, traceless, tracectx
from safe_tracectx.checks import check_trace
from safe_tracectx.hooks import install, uninstall
from safe_tracectx.lint import lint_paths
from safe_tracectx.lint.runner import iter_python_files

TRACE = TraceCtx()


def _bare() -> None:
    token = set_tracectx(TRACE)
    reset_tracectx(token)


def _thunder() -> None:
    with thunder_tracectx(TRACE):
        pass


def _safe() -> None:
    with tracectx(TRACE):
        pass


def _detached() -> None:
    with detached_trace():
        pass


def _scratch() -> None:
    with scratch_trace():
        pass


def _traceless() -> None:
    with traceless():
        pass


ENTER_EXIT: dict[str, Callable[[], None]] = {
    "bare set/reset": _bare,
    "thunder tracectx": _thunder,
    "safe tracectx": _safe,
    "thunder detached_trace": _detached,
    "safe scratch_trace": _scratch,
    "safe traceless": _traceless,
}


@pytest.mark.parametrize("variant", list(ENTER_EXIT))
@pytest.mark.parametrize("round_", range(ROUNDS))
def test_enter_exit(benchmark: BenchmarkFixture, round_: int, variant: str) -> None:
    benchmark.group = "enter/exit"
    benchmark.extra_info.update(round=round_, variant=variant)
    benchmark(ENTER_EXIT[variant])


def _get_many() -> None:
    for _ in range(1000):
        get_tracectx()


@pytest.mark.parametrize("variant", ["not installed", "installed"])
@pytest.mark.parametrize("round_", range(ROUNDS))
def test_hot_path_get_tracectx(benchmark: BenchmarkFixture, round_: int, variant: str) -> None:
    benchmark.group = "get_tracectx x1000"
    benchmark.extra_info.update(round=round_, variant=variant)
    if variant == "installed":
        install()
    try:
        with tracectx(TRACE):
            benchmark(_get_many)
    finally:
        uninstall()


def _chain(length: int) -> TraceCtx:
    trace = TraceCtx()
    with tracectx(trace):
        current = TensorProxy("x", shape=(4,), device=cpu, dtype=float32)
        trace.args = (current,)
        for _ in range(length):
            out = TensorProxy(like=current)
            trace.bound_symbols.append(prims.add.bind(current, current, output=out))
            current = out
    return trace


CHAINS = {"300 symbols": _chain(300), "3000 symbols": _chain(3000), "30000 symbols": _chain(30000)}


@pytest.mark.parametrize("variant", list(CHAINS))
@pytest.mark.parametrize("round_", range(ROUNDS))
def test_check_trace_scaling(benchmark: BenchmarkFixture, round_: int, variant: str) -> None:
    benchmark.group = "check_trace scaling"
    benchmark.extra_info.update(round=round_, variant=variant)
    assert benchmark(check_trace, CHAINS[variant]) == []


THUNDER_DIR = str(Path(str(__import__("thunder").__file__)).parent)
FILES = list(iter_python_files([THUNDER_DIR]))


def _parse_only() -> None:
    for path in FILES:
        ast.parse(path.read_bytes().decode("utf-8"))


def _lint() -> None:
    lint_paths([THUNDER_DIR])


@pytest.mark.parametrize("variant", ["ast.parse", "safe-tracectx lint"])
@pytest.mark.parametrize("round_", range(ROUNDS))
def test_lint_thunder_package(benchmark: BenchmarkFixture, round_: int, variant: str) -> None:
    benchmark.group = "lint the Thunder package"
    benchmark.extra_info.update(round=round_, variant=variant, files=len(FILES))
    benchmark.pedantic(_parse_only if variant == "ast.parse" else _lint, rounds=3, iterations=1)  # type: ignore[no-untyped-call]
