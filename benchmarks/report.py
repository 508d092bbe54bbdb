"""Turn a pytest-benchmark JSON file into docs/performance.md and docs/overheads.png.

    python benchmarks/report.py build/bench.json

Each ratio is computed per round (the variants of a round ran next to each
other), then summarised as the mean of the round ratios and as their median,
each with its 95% bootstrap interval (``bench_stats``); a goal is met when both
intervals are within it.
"""

from __future__ import annotations

import dataclasses
import json
import os
import platform
import statistics
import sys
from collections import defaultdict
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_stats import Interval, bootstrap_mean, bootstrap_median  # noqa: E402
from report_compile import COMPILE_GROUP, compile_section  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent


@dataclasses.dataclass(frozen=True)
class Comparison:
    group: str
    variant: str
    baseline: str
    label: str
    goal: float | None  # the ratio must be at most this (None: informational)
    #: Variants the variant and the baseline are each divided by first, in the same round (a ratio of ratios).
    per: tuple[str, str] | None = None


COMPARISONS = (
    Comparison(COMPILE_GROUP, "strict, pass hooks off", "plain", "compile nanoGPT: install(STRICT), pass hooks off", 1.01),
    Comparison(COMPILE_GROUP, "strict", "plain", "compile nanoGPT: install(STRICT), every pass hooked", 1.02),
    Comparison(COMPILE_GROUP, "strict+audit", "plain", "compile nanoGPT: install(STRICT, audit=True)", 1.03),
    Comparison("enter/exit", "safe tracectx", "thunder tracectx", "tracectx enter/exit vs Thunder's tracectx", 0.6),
    Comparison("enter/exit", "safe tracectx", "bare set/reset", "tracectx enter/exit vs a bare set/reset", 2.5),
    Comparison("enter/exit", "safe scratch_trace", "thunder detached_trace", "scratch_trace vs Thunder's detached_trace", 0.8),
    Comparison("enter/exit", "safe traceless", "thunder tracectx", "traceless vs Thunder's tracectx", None),
    Comparison("get_tracectx", "installed", "not installed", "get_tracectx() installed vs not", 1.05),
    Comparison("check_trace scaling", "3000 symbols", "300 symbols", "check_trace: 300 to 3,000 symbols", None),
    Comparison("check_trace scaling", "30000 symbols", "3000 symbols", "check_trace: 3,000 to 30,000 symbols", None),
    Comparison("check_trace scaling", "read the names, 3000 symbols", "read the names, 300 symbols",
               "reading the names: 300 to 3,000 symbols", None),
    Comparison("check_trace scaling", "read the names, 30000 symbols", "read the names, 3000 symbols",
               "reading the names: 3,000 to 30,000 symbols", None),
    Comparison("check_trace scaling", "3000 symbols", "300 symbols", "check_trace per read of the names: 300 to 3,000",
               1.05, per=("read the names, 3000 symbols", "read the names, 300 symbols")),
    Comparison("check_trace scaling", "30000 symbols", "3000 symbols", "check_trace per read of the names: 3,000 to 30,000",
               1.05, per=("read the names, 30000 symbols", "read the names, 3000 symbols")),
    Comparison("lint the Thunder package", "safe-tracectx lint", "ast.parse", "lint Thunder vs ast.parse alone", 2.0),
)


@dataclasses.dataclass(frozen=True)
class Row:
    label: str
    interval: Interval  # the mean of the round ratios
    median: Interval  # their median
    baseline: float
    goal: float | None
    group: str

    @property
    def met(self) -> str:
        """yes: both intervals (mean, median) are within the goal; no: neither reaches it; else undecided."""
        if self.goal is None:
            return ""
        if max(self.interval.high, self.median.high) <= self.goal:
            return "yes"
        return "**no**" if min(self.interval.low, self.median.low) > self.goal else "undecided"


def samples_by_group(data: dict[str, Any]) -> dict[str, dict[str, list[float]]]:
    """group -> variant -> the value of each round (rounds aligned across the variants of a group)."""
    found: dict[str, dict[str, list[float]]] = defaultdict(dict)
    by_round: dict[str, dict[str, dict[int, float]]] = defaultdict(lambda: defaultdict(dict))
    for bench in data["benchmarks"]:
        info = bench["extra_info"]
        if "samples" in info:  # interleaved rounds run inside one benchmark
            found[bench["group"]].update(info["samples"])
        elif "round" in info:  # one pytest-parametrized benchmark per round and variant
            by_round[bench["group"]][info["variant"]][info["round"]] = float(bench["stats"]["median"])
    for group, variants in by_round.items():
        rounds = sorted(set.intersection(*(set(r) for r in variants.values())))
        for variant, values in variants.items():
            found[group][variant] = [values[r] for r in rounds]
    return found


def rows(data: dict[str, Any]) -> list[Row]:
    samples = samples_by_group(data)
    found = []
    for c in COMPARISONS:
        group = samples.get(c.group, {})
        if not {c.variant, c.baseline, *(c.per or ())} <= group.keys():
            continue
        ratios = [v / b for v, b in zip(group[c.variant], group[c.baseline], strict=True)]
        if c.per is not None:  # each side divided by its yardstick first, round by round
            yardsticks = [pv / pb for pv, pb in zip(group[c.per[0]], group[c.per[1]], strict=True)]
            ratios = [r / y for r, y in zip(ratios, yardsticks, strict=True)]
        found.append(Row(c.label, bootstrap_mean(ratios), bootstrap_median(ratios), statistics.median(group[c.baseline]),
                         c.goal, c.group))
    return found


def _unit(seconds: float) -> str:
    if seconds >= 1:
        return f"{seconds:.2f} s"
    if seconds >= 1e-3:
        return f"{seconds * 1e3:.2f} ms"
    return f"{seconds * 1e6:.3f} µs"


def _machine(data: dict[str, Any]) -> str:
    cpu = data.get("machine_info", {}).get("cpu", {})
    try:
        import numpy
        import thunder
        import torch

        versions = f"torch {torch.__version__}, lightning-thunder {thunder.__version__}, numpy {numpy.__version__}"
    except ImportError:  # pragma: no cover
        versions = "versions unknown"
    return (
        f"{cpu.get('brand_raw', platform.processor() or '?')}, {cpu.get('count', os.cpu_count())} cores "
        f"(shared with other work), {platform.system()} {platform.release()}; "
        f"Python {platform.python_version()}, {versions}"
    )


METHOD = """\
Every figure is a ratio of two variants measured side by side in one process:
rounds of all the variants of a comparison, the order rotated each round; the
ratio is taken within each round, and the table gives the mean of the round
ratios and their median, each with its 95% bootstrap interval (percentile,
10,000 resamples, fixed seed): a round slowed by other work on the shared cores
moves the mean, not the median. Times are the process's CPU time (`time.process_time`): waiting for a
core does not count, though other work on the shared cores still slows the CPU
time down (see the notes).

- enter/exit and `get_tracectx`: `timeit` with the statement inlined in its loop
  (no call of a wrapper per iteration; the garbage collector paused), the best
  of 3 loops of 10,000 (200,000 for `get_tracectx`) per variant per round;
  `install()`/`uninstall()` around each installed loop.
- check_trace scaling: pytest-benchmark's calibrated timing, one benchmark per
  round and variant, its median. Reading a trace itself grows faster than its
  length here (a 30,000-symbol trace outgrows the caches), so the goal is on
  check_trace's growth divided by the growth of the least any check reads (each
  bound symbol's proxy arguments looked up, its outputs' names kept: "read the
  names"), round by round: at most 1.05, linear in the trace it reads.
- lint: one run per variant per round.
- the compile: see below.

**met**: *yes* if both intervals (of the mean and of the median) are within the
goal, **no** if neither reaches it, *undecided* otherwise."""


def render(data: dict[str, Any], found: list[Row], command: str) -> str:
    lines = [
        "# Performance",
        "",
        METHOD,
        "",
        "![overheads](overheads.png)",
        "",
        "| figure | mean ratio | 95% interval | median ratio | 95% interval | rounds | baseline (median) | goal | met |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for row in found:
        goal = "" if row.goal is None else f"≤ {row.goal:g}"
        i, m = row.interval, row.median
        lines.append(
            f"| {row.label} | {i.value:.3f} | {i.low:.3f}–{i.high:.3f} | {m.value:.3f} | {m.low:.3f}–{m.high:.3f} | "
            f"{i.rounds} | {_unit(row.baseline)} | {goal} | {row.met} |"
        )
    compile_bench = next((b for b in data["benchmarks"] if b["group"] == COMPILE_GROUP), None)
    if compile_bench is not None:
        lines += ["", *compile_section(compile_bench["extra_info"])]
    notes = Path(__file__).with_name("NOTES.md")
    if notes.exists():
        lines += ["", "## Notes", "", notes.read_text(encoding="utf-8").rstrip()]
    lines += ["", f"Machine: {_machine(data)}.", "", f"Command: `{command}` (regenerates this page and the chart).", ""]
    return "\n".join(lines)


def chart(found: list[Row], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    panels = [
        ("whole compile (zoomed)", [r for r in found if r.group == COMPILE_GROUP]),
        ("enter/exit, get_tracectx, lint", [r for r in found if r.group != COMPILE_GROUP and r.goal is not None and r.goal <= 2]),
    ]
    panels = [(title, shown) for title, shown in panels if shown]
    heights = [len(shown) + 1 for _, shown in panels]
    fig, axes = plt.subplots(len(panels), 1, figsize=(9, 0.5 * sum(heights) + 1.6), squeeze=False,
                             gridspec_kw={"height_ratios": heights})
    for ax, (title, shown) in zip(axes[:, 0], panels, strict=True):
        values = [r.interval.value for r in shown]
        errors = [[r.interval.value - r.interval.low for r in shown], [r.interval.high - r.interval.value for r in shown]]
        colors = ["tab:green" if r.met == "yes" else "tab:red" if "no" in r.met else "tab:orange" for r in shown]
        for index, row in enumerate(shown):
            ax.errorbar([values[index]], [index], xerr=[[errors[0][index]], [errors[1][index]]], fmt="o",
                        color=colors[index], capsize=4, markersize=6)
            ax.plot([row.median.value], [index], marker="x", color="black", markersize=6)
            if row.goal is not None:
                ax.plot([row.goal, row.goal], [index - 0.4, index + 0.4], color="black", linewidth=1.5)
        ax.set_yticks(range(len(shown)), [r.label for r in shown])
        ax.set_ylim(len(shown) - 0.5, -0.5)
        ax.axvline(1.0, color="grey", linestyle=":", linewidth=1)
        if title.startswith("whole"):
            ax.set_xlim(0.97, max(1.08, max(r.interval.high for r in shown) + 0.01))
        else:
            ax.set_xlim(0, 2.1)
        ax.set_title(title, fontsize=10)
    axes[-1, 0].set_xlabel("ratio (dot: mean of the round ratios, bar: its 95% interval; x: their median; black tick: goal)")
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print(__doc__, file=sys.stderr)
        return 2
    data = json.loads(Path(argv[0]).read_text())
    found = rows(data)
    (ROOT / "docs" / "performance.md").write_text(render(data, found, "make bench"), encoding="utf-8")
    chart(found, ROOT / "docs" / "overheads.png")
    for row in found:
        i, m = row.interval, row.median
        print(f"{row.label:<58} mean {i.value:.4f} [{i.low:.4f}-{i.high:.4f}]  median {m.value:.4f} "
              f"[{m.low:.4f}-{m.high:.4f}]  n={i.rounds}  goal {row.goal}  {row.met}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
