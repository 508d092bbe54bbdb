"""Stress across threads, asyncio tasks and copied Contexts; bounded memory; a linter that never crashes."""

from __future__ import annotations

import asyncio
import contextvars
import gc
import sys
import threading
import tracemalloc
import weakref
from pathlib import Path

import hypothesmith
import pytest
from hypothesis import HealthCheck, given, settings
from thunder.core.devices import cpu
from thunder.core.dtypes import float32
from thunder.core.proxies import TensorProxy
from thunder.core.trace import TraceCtx, get_tracectx, reset_tracectx, set_tracectx

from safe_tracectx import is_traceless, scratch_trace, traceless, tracectx
from safe_tracectx.hooks import audit
from safe_tracectx.hooks import installed
from safe_tracectx.lint import lint_paths, lint_source, select_codes


def _hammer(index: int, rounds: int, failures: list[str], names: list[str]) -> None:
    mine = [TraceCtx() for _ in range(4)]
    for step in range(rounds):
        with tracectx(mine[0]):
            with tracectx(mine[step % 4]):
                token = set_tracectx(mine[(step + 1) % 4])
                try:
                    with scratch_trace(mine[0]) as scratch:
                        if get_tracectx() is not scratch:
                            failures.append(f"{index}/{step}: scratch")
                finally:
                    reset_tracectx(token)
                if get_tracectx() is not mine[step % 4]:
                    failures.append(f"{index}/{step}: inner")
            if step % 25 == 0:
                with traceless():
                    names.append(TensorProxy(shape=(1,), device=cpu, dtype=float32).name)
            if get_tracectx() is not mine[0]:
                failures.append(f"{index}/{step}: outer")
    if get_tracectx() is not None:
        failures.append(f"{index}: left a trace active")


@pytest.mark.parametrize("hooked", [False, True], ids=["plain", "installed"])
def test_eight_threads_thousands_of_nested_operations(hooked: bool) -> None:
    failures: list[str] = []
    names: list[str] = []
    with installed() if hooked else _nothing():
        threads = [threading.Thread(target=_hammer, args=(i, 1500, failures, names)) for i in range(8)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    assert failures == []
    assert len(names) == 8 * 60 and len(set(names)) == len(names), "the traceless counter gave a name twice"


class _nothing:
    def __enter__(self) -> None:
        return None

    def __exit__(self, *exc: object) -> None:
        return None


def test_hundreds_of_tasks_with_awaits_inside_blocks_installed() -> None:
    async def task(index: int) -> bool:
        trace = TraceCtx()
        ok = True
        for _ in range(10):
            with tracectx(trace):
                await asyncio.sleep(0)
                token = set_tracectx(TraceCtx())
                await asyncio.sleep(0)
                reset_tracectx(token)
                ok &= get_tracectx() is trace
        return ok and get_tracectx() is None

    async def main() -> list[bool]:
        return list(await asyncio.gather(*(task(i) for i in range(300))))

    with installed("strict"):
        assert all(asyncio.run(main()))


def test_copy_context_runs_see_only_their_own_traces() -> None:
    outer = TraceCtx()
    seen: list[object] = []
    with tracectx(outer):
        for _ in range(200):
            context = contextvars.copy_context()

            def inside() -> None:
                inner = TraceCtx()
                with tracectx(inner):
                    seen.append(get_tracectx() is inner)
                seen.append(get_tracectx() is outer)

            context.run(inside)
            assert get_tracectx() is outer
    assert all(seen) and len(seen) == 400


def test_the_traceless_mark_keeps_no_proxy_alive() -> None:
    with traceless():
        proxy = TensorProxy(shape=(1,), device=cpu, dtype=float32)
    assert is_traceless(proxy)
    ref = weakref.ref(proxy)
    del proxy
    gc.collect()
    assert ref() is None


def test_many_audits_and_installs_leave_no_growth() -> None:
    def one_round() -> None:
        with audit(max_events=10) as log:
            with tracectx(TraceCtx()):
                for _ in range(20):
                    TensorProxy(shape=(1,), device=cpu, dtype=float32)
        assert log.counts["proxy_created"] == 20 and len(log.events) == 10

    one_round()
    gc.collect()
    tracemalloc.start()
    start, _ = tracemalloc.get_traced_memory()
    for _ in range(300):
        one_round()
    gc.collect()
    end, _ = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    assert end - start < 300_000, f"grew by {end - start} bytes over 300 audits"


# ---- the linter never crashes -----------------------------------------------------------

@settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck))
@given(source=hypothesmith.from_grammar())
def test_lint_on_generated_python_never_crashes(source: str) -> None:
    findings = lint_source(source, "generated.py", codes=select_codes(audit=True))
    assert all(f.code.startswith("STC") and f.line >= 1 for f in findings)


@pytest.mark.slow
def test_lint_on_every_file_of_torch_and_thunder_exits_0_or_1() -> None:
    import thunder
    import torch

    roots = [Path(torch.__file__).parent, Path(thunder.__file__).parent]
    result = lint_paths([str(root) for root in roots], codes=select_codes(audit=True))
    assert result.files_checked > 2000
    codes = {item.finding.code for item in result.findings}
    assert codes <= {"STC001", "STC002", "STC003", "STC100", "STC901", "STC902"}
    assert sys.modules.get("safe_tracectx.lint") is not None
