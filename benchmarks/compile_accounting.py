"""The compile's overhead by accounting: how often each hook runs in one compile, times what one call costs.

- ``count_calls``: one compile under ``install("strict")`` with cProfile, which
  counts every call of a code object (only the counts are used: profiling
  slows the compile);
- ``per_call_costs``: a hooked ``set_tracectx``/``reset_tracectx`` pair and a
  hooked ``make_proxy_name`` against Thunder's own, timed in interleaved rounds;
- the pass hooks' own time and the collector's are probed in every round of
  the benchmark itself (``compile_probes``);
- ``check_fraction``: ``check_trace`` over every trace a plain compile keeps,
  the saved-for-backward hand-over of its final forward and backward, the
  gradients its backward drops, and the
  generated-code scan of every compiled program (the checks the hooks add).
"""

from __future__ import annotations

import cProfile
import time
from collections.abc import Callable

import thunder
import thunder.core.proxies as thunder_proxies
import thunder.core.trace as thunder_trace
import torch
from bench_stats import Samples, cpu_timeit, run_rounds
from nanogpt_compile import compile_once, installation

from safe_tracectx import tracectx
from safe_tracectx._support import events
from safe_tracectx.hooks import guard, runs
from safe_tracectx.traces.checks import check_trace
from safe_tracectx.traces.dropped_gradients import dropped_gradients
from safe_tracectx.traces.generated_code import undefined_globals
from safe_tracectx.traces.handover import check_handover

__all__ = ["HOOKED_OPS", "check_fraction", "count_calls", "per_call_costs"]

#: The hooks timed one call at a time, with the timeit statement of one call (the variants: original, hooked).
HOOKED_OPS = {
    "set/reset pair": "token = trace_module.set_tracectx(TRACE); trace_module.reset_tracectx(token)",
    "make_proxy_name": "proxies.make_proxy_name(prefix='t')",
}
COST_VARIANTS = ("not installed", "strict", "strict+audit")


def count_calls(model: torch.nn.Module, idx: torch.Tensor) -> dict[str, int]:
    """Calls per compile (under ``install("strict")``, every pass hooked) of each hook and of ``get_tracectx``."""
    get_tracectx = thunder_trace.get_tracectx
    profile = cProfile.Profile()
    with installation("strict"):
        if thunder_trace.get_tracectx is not get_tracectx:
            raise AssertionError("install() replaced get_tracectx")
        codes = {
            "get_tracectx (Thunder's own)": get_tracectx.__code__,
            "set_tracectx (hooked)": guard.guarded_set_tracectx.__code__,
            "reset_tracectx (hooked)": guard.guarded_reset_tracectx.__code__,
            "make_proxy_name (hooked)": thunder_proxies.make_proxy_name.__code__,
            "pass runs (hooked passes)": runs.run_pass.__code__,
        }
        profile.enable()
        compile_once(model, idx)
        profile.disable()
    counts = {label: 0 for label in codes}
    by_code = {id(code): label for label, code in codes.items()}
    for entry in profile.getstats():
        label = by_code.get(id(entry.code))
        if label is not None:
            counts[label] += entry.callcount
    return counts


def _cost(op: str, variant: str) -> Callable[[], float]:
    def measure() -> float:
        trace = thunder_trace.TraceCtx()
        namespace = {"trace_module": thunder_trace, "proxies": thunder_proxies, "TRACE": trace}
        with installation("plain" if variant == "not installed" else variant), tracectx(trace):
            # As in a compile, where every proxy is made inside a pass that install() hooks.
            tokens = (runs.current_run.set(runs.PassRun("bench", "bench", "user")), events.current_pass.set("bench"))
            try:
                return cpu_timeit(HOOKED_OPS[op], namespace, number=4000)
            finally:
                events.current_pass.reset(tokens[1])
                runs.current_run.reset(tokens[0])

    return measure


def per_call_costs(rounds: int) -> dict[str, Samples]:
    """Op -> variant -> CPU seconds per call, round by round (each round: every variant of every op, rotated)."""
    measure = {f"{op}|{variant}": _cost(op, variant) for op in HOOKED_OPS for variant in COST_VARIANTS}
    samples, _ = run_rounds(measure, rounds=rounds)
    costs: dict[str, Samples] = {op: {} for op in HOOKED_OPS}
    for key, values in samples.items():
        op, variant = key.split("|")
        costs[op][variant] = values
    return costs


def check_fraction(model: torch.nn.Module, idx: torch.Tensor) -> dict[str, float]:
    """The checks' CPU seconds over a plain compile's traces, against the compile's: ``check_trace`` over every
    trace, ``check_handover`` of the final forward and backward, ``dropped_gradients`` of the program against them,
    the generated-code scan of every program."""
    model.zero_grad(set_to_none=True)
    started = time.process_time()
    jitted = thunder.jit(model)
    _, loss = jitted(idx, idx)
    loss.backward()
    compile_seconds = time.process_time() - started
    forward, backward = thunder.last_traces(jitted), thunder.last_backward_traces(jitted)
    traces = [*forward, *backward]
    started = time.process_time()
    violations = sum(len(check_trace(t)) for t in traces)
    checks = time.process_time() - started
    started = time.process_time()
    violations += len(check_handover(forward[-1], backward[-1]))
    handover = time.process_time() - started
    started = time.process_time()
    violations += len(dropped_gradients(forward[0], forward[-1], backward[-1], grad_enabled=True))
    dropped = time.process_time() - started
    programs = [t.python_callable() for t in (forward[-1], backward[-1])]  # compiled once, as Thunder does
    started = time.process_time()
    violations += sum(len(undefined_globals(program)) for program in programs)
    generated = time.process_time() - started
    return {"compile": compile_seconds, "checks": checks, "handover": handover, "dropped": dropped,
            "generated_code": generated,
            "programs": len(programs), "traces": len(traces), "violations": violations}
