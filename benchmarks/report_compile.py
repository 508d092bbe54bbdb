"""The compile section of docs/performance.md: rounds, CPU and wall ratios, and the accounting cross-check.

``compile_section(extra_info)`` takes what benchmarks/test_bench_compile.py
stored and returns Markdown lines.
"""

from __future__ import annotations

import statistics
from typing import Any, Final

from bench_stats import Interval, bootstrap_mean, bootstrap_median, ratios

__all__ = ["COMPILE_GROUP", "compile_section", "predicted"]

COMPILE_GROUP: Final = "nanoGPT compile"
_SET, _NAME, _GET = "set_tracectx (hooked)", "make_proxy_name (hooked)", "get_tracectx (Thunder's own)"


def _pct(value: float) -> str:
    return f"{value * 100:+.2f}%"


def _ratio(interval: Interval) -> str:
    return f"{interval.value:.4f} [{interval.low:.4f}–{interval.high:.4f}]"


def _delta(costs: dict[str, dict[str, list[float]]], op: str, variant: str) -> Interval:
    """The extra CPU seconds per call of ``op`` hooked under ``variant``, round by round against the original."""
    own = costs[op]
    return bootstrap_mean([h - o for h, o in zip(own[variant], own["not installed"], strict=True)])


def _paired(samples: dict[str, list[float]], variant: str) -> Interval:
    """variant - plain, round by round (seconds)."""
    return bootstrap_mean([v - p for v, p in zip(samples[variant], samples["plain"], strict=True)])


def _parts(info: dict[str, Any], variant: str) -> dict[str, float]:
    """The overhead of ``variant`` in CPU seconds per compile, part by part."""
    counts, costs = info["counts"], info["costs"]
    hooks = "strict+audit" if variant == "strict+audit" else "strict"
    return {
        "set/reset": int(counts[_SET]) * _delta(costs, "set/reset pair", hooks).value,
        "naming": int(counts[_NAME]) * _delta(costs, "make_proxy_name", hooks).value,
        "passes": statistics.fmean(info["pass_hooks"][variant]),
        "gc": _paired(info["gc"], variant).value,
    }


def predicted(info: dict[str, Any]) -> dict[str, float]:
    """The overhead each variant should have by accounting, as a fraction of the plain compile."""
    plain = statistics.fmean(info["samples"]["plain"])
    return {variant: sum(_parts(info, variant).values()) / plain for variant in list(info["samples"])[1:]}


def _rounds_lines(info: dict[str, Any]) -> list[str]:
    samples, wall, collected = info["samples"], info["wall"], info["gc"]
    lines = [
        "| variant | CPU (median) | CPU ratio to plain: mean [95%] | median [95%] | wall (median) | "
        "wall ratio to plain [95%] | of which GC (median) |",
        "|---|---|---|---|---|---|---|",
    ]
    for variant in samples:
        cpu_ratio = "—" if variant == "plain" else _ratio(bootstrap_mean(ratios(samples, variant, "plain")))
        cpu_median = "—" if variant == "plain" else _ratio(bootstrap_median(ratios(samples, variant, "plain")))
        wall_ratio = "—" if variant == "plain" else _ratio(bootstrap_mean(ratios(wall, variant, "plain")))
        lines.append(
            f"| {variant} | {statistics.median(samples[variant]):.2f} s | {cpu_ratio} | {cpu_median} | "
            f"{statistics.median(wall[variant]):.2f} s | {wall_ratio} | {statistics.median(collected[variant]):.2f} s |"
        )
    return lines


def _alignment_lines(info: dict[str, Any]) -> list[str]:
    """Where each round ran on CPython's data stack, and how far apart its rounds' ratios are."""
    words, samples = info.get("stack_words"), info["samples"]
    if not words:
        return []
    spread = "; ".join(
        f"`{v}` {min(r):.3f} to {max(r):.3f}" for v in list(samples)[1:] if (r := ratios(samples, v, "plain"))
    )
    return [
        f"The rounds ran at {len(set(words))} depths into CPython's data stack (from 0 to {max(words):,} "
        "extra words, the golden-ratio sequence over one 16 KiB chunk, the same for every variant of a round): "
        "where Thunder's busiest calls fall against a chunk's end decides how many chunks a compile maps and "
        f"unmaps (benchmarks/NOTES.md), so one depth measures the alignment as much as the hooks. Round "
        f"ratios ranged: {spread}.",
        "",
    ]


def _accounting_lines(info: dict[str, Any]) -> list[str]:
    counts, costs = info["counts"], info["costs"]
    variants = list(info["samples"])[1:]

    def us(interval: Interval) -> str:
        return f"{interval.value * 1e6:.2f} [{interval.low * 1e6:.2f}–{interval.high * 1e6:.2f}]"

    def ms(interval: Interval) -> str:
        return f"{interval.value * 1e3:.0f} [{interval.low * 1e3:.0f}–{interval.high * 1e3:.0f}]"

    lines = [
        "| hook | calls in one compile | extra CPU per call, µs: strict | strict+audit |",
        "|---|---|---|---|",
        f"| `set_tracectx` + `reset_tracectx` (a pair) | {counts[_SET]:,} + {counts['reset_tracectx (hooked)']:,} | "
        f"{us(_delta(costs, 'set/reset pair', 'strict'))} | {us(_delta(costs, 'set/reset pair', 'strict+audit'))} |",
        f"| `make_proxy_name` | {counts[_NAME]:,} | {us(_delta(costs, 'make_proxy_name', 'strict'))} | "
        f"{us(_delta(costs, 'make_proxy_name', 'strict+audit'))} |",
        f"| hooked passes | {counts['pass runs (hooked passes)']:,} pass runs | measured in the compile (below) | |",
        f"| `get_tracectx` | {counts[_GET]:,} | 0: Thunder's own function, not replaced | 0 |",
        "",
        "| variant | set/reset | naming | pass hooks' own time [95%] | more GC than plain [95%] | predicted | "
        "measured (CPU) [95%] |",
        "|---|---|---|---|---|---|---|",
    ]
    plain = statistics.fmean(info["samples"]["plain"])
    for variant in variants:
        parts = _parts(info, variant)
        own = bootstrap_mean(info["pass_hooks"][variant])
        measured = bootstrap_mean(ratios(info["samples"], variant, "plain"))
        lines.append(
            f"| {variant} | {parts['set/reset'] * 1e3:.1f} ms | {parts['naming'] * 1e3:.1f} ms | "
            f"{ms(own) if own.value else '0'} ms | {ms(_paired(info['gc'], variant))} ms | "
            f"{_pct(sum(parts.values()) / plain)} | {_pct(measured.value - 1)} "
            f"[{_pct(measured.low - 1)}, {_pct(measured.high - 1)}] |"
        )
    return lines


def compile_section(info: dict[str, Any]) -> list[str]:
    samples, warmup, checks, limits = info["samples"], info["warmup"], info["checks"], info["limits"]
    rounds = len(samples["plain"])
    plain = statistics.median(samples["plain"])
    return [
        "## The whole compile",
        "",
        "Thunder's 4-layer nanoGPT from its tests (`thunder/tests/nanogpt_model.py`, "
        "`GPTConfig(dropout=0, block_size=64, vocab_size=256, n_layer=4, n_head=4, n_embd=64)`, a batch of 2 x 32 "
        "tokens), `thunder.jit(model)` with the default executors, forward and `loss.backward()` (which compiles "
        "the backward), on the CPU. Each compile is a fresh `thunder.jit` of the same model in the same process "
        "(each had exactly one cache miss). Variants: plain; `install(\"strict\")` with its pass hooks switched "
        "off by a benchmark-only patch (`set_tracectx`/`reset_tracectx` and proxy naming hooked, no pass); "
        "`install(\"strict\")` as shipped (every pass hooked: Thunder's pass functions, every Transform method, "
        "every executor's `fusion_pass`); `install(\"strict\", audit=True)`. After each `uninstall()` every "
        "function, method and `__init_subclass__` the hooks replace was checked to be Thunder's original again.",
        "",
        f"Rounds: {rounds} after a warm-up round (discarded); {info['stop']} (goal: every half-width < "
        f"{info['half_width_goal'] * 100:g}%; at least {limits['min_rounds']} rounds, at most "
        f"{limits['max_rounds']} or {limits['max_minutes']:g} min). Warm-up plain compile "
        f"{warmup['plain']:.2f} s CPU against a median of {plain:.2f} s after it. Load average (1 min) "
        f"{info['load_before'][0]:.2f} before, {info['load_after'][0]:.2f} after.",
        "",
        *_alignment_lines(info),
        *_rounds_lines(info),
        "",
        "### Cross-check by accounting",
        "",
        "The calls of one compile under `install(\"strict\")` counted with cProfile (counts only), times the "
        "extra CPU time of one hooked call over Thunder's own call (timeit in "
        f"{len(info['costs']['set/reset pair']['not installed'])} interleaved rounds, inside a pass run as in a "
        "compile); plus two probes kept in every round of the benchmark: the pass hooks' own CPU time (each "
        "hooked pass's wrapper time minus the pass itself: checking, and with the audit fingerprinting, its "
        "output; the collector's time left out; 4 clock reads per pass run) and the garbage collector's CPU "
        "time (`gc.callbacks`), paired with the plain compile of the same round.",
        "",
        *_accounting_lines(info),
        "",
        f"`check_trace` over all {checks['traces']} traces a plain compile keeps: {checks['checks'] * 1e3:.1f} ms, "
        f"{checks['checks'] / checks['compile'] * 100:.2f}% of that compile ({checks['violations']} violations); "
        f"the saved-for-backward hand-over of its final forward and backward: {checks['handover'] * 1e3:.2f} ms "
        f"({checks['handover'] / checks['compile'] * 100:.3f}%); the gradients its backward drops "
        f"(`gradient-dropped`): {checks.get('dropped', 0.0) * 1e3:.2f} ms "
        f"({checks.get('dropped', 0.0) / checks['compile'] * 100:.3f}%); the generated-code scan of its "
        f"{checks['programs']} programs: {checks['generated_code'] * 1e3:.2f} ms "
        f"({checks['generated_code'] / checks['compile'] * 100:.3f}%).",
    ]
