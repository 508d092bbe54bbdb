"""The whole compile: Thunder's 4-layer test nanoGPT, default executors, forward + backward, in this process.

Rounds of the variants (order rotated each round, a warm-up round discarded),
each round at another depth of CPython's data stack (``alignment``: the same
for every variant of the round, spread over a whole chunk), run until the 95%
interval of every ratio to "plain" is within ±1%, or a cap
(``BENCH_COMPILE_MAX_MINUTES``, ``BENCH_COMPILE_MAX_ROUNDS``). Then the
accounting cross-check (``compile_accounting``). Everything lands in the
benchmark's ``extra_info`` for benchmarks/report.py.
"""

from __future__ import annotations

import os
from typing import Any

from bench_config import COMPILE_MAX_MINUTES, COMPILE_MAX_ROUNDS, COMPILE_MIN_ROUNDS, COST_ROUNDS, HALF_WIDTH
from bench_stats import Samples, bootstrap_mean, ratios, run_rounds
from compile_accounting import check_fraction, count_calls, per_call_costs
from nanogpt_compile import VARIANTS, Compile, alignment, hooked_objects, make_model, measure, snapshot
from pytest_benchmark.fixture import BenchmarkFixture


def _narrow(samples: Samples) -> bool:
    return all(bootstrap_mean(ratios(samples, v, "plain")).half_width < HALF_WIDTH for v in VARIANTS[1:])


def test_nanogpt_compile(benchmark: BenchmarkFixture) -> None:
    benchmark.group = "nanoGPT compile"
    model, idx = make_model()
    before = snapshot()
    probes: dict[str, Samples] = {key: {v: [] for v in VARIANTS} for key in ("wall", "gc", "pass_hooks")}
    info: dict[str, Any] = {"load_before": os.getloadavg()}
    warmup = {v: measure(v, model, idx, lambda result, own: None) for v in VARIANTS}

    def recorder(variant: str) -> Any:
        def record(result: Compile, own: float) -> None:
            probes["wall"][variant].append(result.wall)
            probes["gc"][variant].append(result.gc)
            probes["pass_hooks"][variant].append(own)

        return record

    words: list[int] = []

    def run() -> None:
        calls = {v: (lambda v=v: measure(v, model, idx, recorder(v), words=words[-1])) for v in VARIANTS}
        samples, stop = run_rounds(
            calls, rounds=COMPILE_MIN_ROUNDS, max_rounds=COMPILE_MAX_ROUNDS, max_seconds=COMPILE_MAX_MINUTES * 60,
            done=_narrow, before_round=lambda round_: words.append(alignment(round_)),
        )
        info.update(samples=samples, stop=stop, stack_words=words)

    benchmark.pedantic(run, rounds=1, iterations=1)  # type: ignore[no-untyped-call]
    assert hooked_objects(snapshot(), before) == []  # every uninstall() put every original back
    info.update(
        probes,
        warmup=warmup,
        counts=count_calls(model, idx),
        costs=per_call_costs(COST_ROUNDS),
        checks=check_fraction(model, idx),
        load_after=os.getloadavg(),
        half_width_goal=HALF_WIDTH,
        limits={"min_rounds": COMPILE_MIN_ROUNDS, "max_rounds": COMPILE_MAX_ROUNDS, "max_minutes": COMPILE_MAX_MINUTES},
    )
    assert hooked_objects(snapshot(), before) == []
    assert info["checks"]["violations"] == 0
    assert info["counts"]["get_tracectx (Thunder's own)"] > 0
    benchmark.extra_info.update(info)
