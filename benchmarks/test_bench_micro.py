"""Enter/exit, the hot path under install(), check_trace scaling, and lint against ast.parse.

Enter/exit and get_tracectx: interleaved rounds (order rotated), each variant
timed in each round with timeit (the statement inlined in timeit's loop, best
of 3 loops, process CPU time); lint: one CPU-timed run per variant per round.
"""

from __future__ import annotations

import ast
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from bench_config import LINT_ROUNDS, MICRO_ROUNDS, ROUNDS
from bench_stats import cpu_timeit, run_rounds
from pytest_benchmark.fixture import BenchmarkFixture
from thunder.core import prims
from thunder.core.devices import cpu
from thunder.core.dtypes import float32
from thunder.core.proxies import TensorProxy
import thunder.core.trace as thunder_trace
from thunder.core.trace import TraceCtx, detached_trace, reset_tracectx, set_tracectx
from thunder.core.trace import tracectx as thunder_tracectx

from safe_tracectx import scratch_trace, traceless, tracectx
from safe_tracectx.hooks import install, uninstall
from safe_tracectx.lint import lint_paths
from safe_tracectx.lint.runner import iter_python_files
from safe_tracectx.traces.checks import check_trace

TRACE = TraceCtx()
NAMESPACE = {
    "TRACE": TRACE,
    "set_tracectx": set_tracectx,
    "reset_tracectx": reset_tracectx,
    "thunder_tracectx": thunder_tracectx,
    "tracectx": tracectx,
    "detached_trace": detached_trace,
    "scratch_trace": scratch_trace,
    "traceless": traceless,
    "trace_module": thunder_trace,  # get_tracectx looked up where install() would replace it
}

#: One enter/exit of each, as the statement timeit repeats.
ENTER_EXIT = {
    "bare set/reset": "token = set_tracectx(TRACE); reset_tracectx(token)",
    "thunder tracectx": "with thunder_tracectx(TRACE): pass",
    "safe tracectx": "with tracectx(TRACE): pass",
    "thunder detached_trace": "with detached_trace(): pass",
    "safe scratch_trace": "with scratch_trace(): pass",
    "safe traceless": "with traceless(): pass",
}


def _timed(stmt: str, number: int) -> float:
    return cpu_timeit(stmt, NAMESPACE, number=number)


def test_enter_exit(benchmark: BenchmarkFixture) -> None:
    benchmark.group = "enter/exit"
    measure = {variant: (lambda stmt=stmt: _timed(stmt, 10_000)) for variant, stmt in ENTER_EXIT.items()}
    samples, _ = benchmark.pedantic(run_rounds, (measure,), {"rounds": MICRO_ROUNDS}, rounds=1, iterations=1)  # type: ignore[no-untyped-call]
    benchmark.extra_info.update(samples=samples, unit="CPU seconds per enter+exit")


def _get_many(installed: bool) -> float:
    if installed:
        install()
    try:
        with tracectx(TRACE):
            return _timed("trace_module.get_tracectx()", 200_000)
    finally:
        if installed:
            uninstall()


def test_hot_path_get_tracectx(benchmark: BenchmarkFixture) -> None:
    benchmark.group = "get_tracectx"
    measure = {"not installed": lambda: _get_many(False), "installed": lambda: _get_many(True)}
    samples, _ = benchmark.pedantic(run_rounds, (measure,), {"rounds": MICRO_ROUNDS}, rounds=1, iterations=1)  # type: ignore[no-untyped-call]
    benchmark.extra_info.update(samples=samples, unit="CPU seconds per call")


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


def read_names(trace: TraceCtx) -> int:
    """The least any check of names reads: each bound symbol's proxy arguments looked up, its outputs' names kept.

    What reading a trace costs on this machine at each size (a larger trace outgrows the caches), the
    yardstick of check_trace's growth.
    """
    defined: set[str] = set()
    missing = 0
    for bsym in trace.bound_symbols:
        for proxy in bsym.flat_proxy_args:
            missing += proxy.name not in defined
        defined.update(proxy.name for proxy in bsym.flat_proxy_outs)
    return missing


READERS: dict[str, Callable[[TraceCtx], object]] = {"check_trace": check_trace, "read the names": read_names}
EXPECTED: dict[str, object] = {"check_trace": [], "read the names": 2}  # x + x: the chain's input is not defined in it


@pytest.mark.parametrize("reader", list(READERS))
@pytest.mark.parametrize("variant", list(CHAINS))
@pytest.mark.parametrize("round_", range(ROUNDS))
def test_check_trace_scaling(benchmark: BenchmarkFixture, round_: int, variant: str, reader: str) -> None:
    benchmark.group = "check_trace scaling"
    label = variant if reader == "check_trace" else f"{reader}, {variant}"
    benchmark.extra_info.update(round=round_, variant=label)
    assert benchmark(READERS[reader], CHAINS[variant]) == EXPECTED[reader]


THUNDER_DIR = str(Path(str(__import__("thunder").__file__)).parent)
FILES = list(iter_python_files([THUNDER_DIR]))


def _cpu(function: Callable[[], object]) -> float:
    started = time.process_time()
    function()
    return time.process_time() - started


def _parse_only() -> None:
    for path in FILES:
        ast.parse(path.read_bytes().decode("utf-8"))


def _lint() -> None:
    lint_paths([THUNDER_DIR])


def test_lint_thunder_package(benchmark: BenchmarkFixture) -> None:
    benchmark.group = "lint the Thunder package"
    measure = {"ast.parse": lambda: _cpu(_parse_only), "safe-tracectx lint": lambda: _cpu(_lint)}
    samples, _ = benchmark.pedantic(run_rounds, (measure,), {"rounds": LINT_ROUNDS}, rounds=1, iterations=1)  # type: ignore[no-untyped-call]
    benchmark.extra_info.update(samples=samples, unit="CPU seconds", files=len(FILES))
