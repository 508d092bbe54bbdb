"""Each thread and each asyncio task sees only its own traces."""

from __future__ import annotations

import asyncio
import random
import threading

from thunder.core.trace import TraceCtx, get_tracectx

from safe_tracectx import scratch_trace, traceless, tracectx


def test_threads_with_their_own_traces_never_see_each_other() -> None:
    barrier = threading.Barrier(6)
    failures: list[str] = []

    def worker(index: int) -> None:
        mine = [TraceCtx() for _ in range(3)]
        barrier.wait()
        for step in range(300):
            with tracectx(mine[0]):
                with tracectx(mine[step % 3]):
                    if get_tracectx() is not mine[step % 3]:
                        failures.append(f"thread {index} step {step}: inner")
                if get_tracectx() is not mine[0]:
                    failures.append(f"thread {index} step {step}: outer")
        if get_tracectx() is not None:
            failures.append(f"thread {index}: left a trace active")

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert failures == []


def test_asyncio_tasks_with_interleaved_awaits_keep_their_traces() -> None:
    async def task(index: int, seen: dict[int, list[bool]]) -> None:
        rng = random.Random(index)
        trace = TraceCtx()
        results = seen.setdefault(index, [])
        for _ in range(5):
            with tracectx(trace):
                await asyncio.sleep(rng.random() / 1000)
                results.append(get_tracectx() is trace)
                with scratch_trace(trace) as scratch:
                    await asyncio.sleep(0)
                    results.append(get_tracectx() is scratch)
                results.append(get_tracectx() is trace)
        results.append(get_tracectx() is None)

    async def main() -> dict[int, list[bool]]:
        seen: dict[int, list[bool]] = {}
        await asyncio.gather(*(task(i, seen) for i in range(100)))
        return seen

    seen = asyncio.run(main())
    assert len(seen) == 100
    assert all(all(results) and len(results) == 16 for results in seen.values())


def test_traceless_names_are_unique_across_threads() -> None:
    from thunder.core.devices import cpu
    from thunder.core.dtypes import float32
    from thunder.core.proxies import TensorProxy

    names: list[list[str]] = [[] for _ in range(4)]

    def worker(index: int) -> None:
        for _ in range(200):
            with traceless():
                names[index].append(TensorProxy(shape=(1,), device=cpu, dtype=float32).name)

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    flat = [name for per_thread in names for name in per_thread]
    assert len(flat) == 800 and len(set(flat)) == 800
