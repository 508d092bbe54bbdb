"""The whole compile of the demo GPT (torch.compile executor, fw + bw, CPU), each run in a fresh process.

The checks' cost is measured in the same processes: check_trace over every trace
Thunder keeps for the compile, as a fraction of the compile time.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from bench_config import ROUNDS
from pytest_benchmark.fixture import BenchmarkFixture

PROGRAM = r"""
import json, os, sys, time, warnings
os.environ.setdefault("TORCHINDUCTOR_VEC_ISA_OK", "1")
warnings.simplefilter("ignore")
import torch, thunder
from thunder.executors.torch_compile import torch_compile_ex
from safe_tracectx.demo.model import tiny_gpt
from safe_tracectx.checks import check_trace
from safe_tracectx.hooks import install, uninstall
variant = sys.argv[1]
model = tiny_gpt(seed=0)
idx = torch.randint(0, 64, (2, 16), generator=torch.Generator().manual_seed(0))
if variant != "plain":
    install("strict", audit=variant == "strict+audit")
started = time.perf_counter()
jitted = thunder.jit(model, executors=[torch_compile_ex])
_, loss = jitted(idx, idx)
loss.backward()
compile_seconds = time.perf_counter() - started
uninstall()
traces = [*thunder.last_traces(jitted), *thunder.last_backward_traces(jitted)]
started = time.perf_counter()
violations = sum(len(check_trace(t)) for t in traces)
check_seconds = time.perf_counter() - started
print(json.dumps({"compile": compile_seconds, "checks": check_seconds, "traces": len(traces), "violations": violations}))
"""


@pytest.mark.parametrize("variant", ["plain", "strict", "strict+audit"])
@pytest.mark.parametrize("round_", range(ROUNDS))
def test_whole_compile(benchmark: BenchmarkFixture, round_: int, variant: str) -> None:
    benchmark.group = "whole compile (fresh process)"
    results: dict[str, float] = {}

    def run() -> None:
        out = subprocess.run([sys.executable, "-c", PROGRAM, variant], capture_output=True, text=True, check=True)
        results.update(json.loads(out.stdout.strip().splitlines()[-1]))

    benchmark.pedantic(run, rounds=1, iterations=1)  # type: ignore[no-untyped-call]
    benchmark.extra_info.update(round=round_, variant=variant, **results)
    assert results["violations"] == 0
