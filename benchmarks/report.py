"""Turn a pytest-benchmark JSON file into docs/performance.md and docs/overheads.png.

    python benchmarks/report.py build/bench.json

Each ratio is computed per round (the variants of a round ran next to each other),
then summarised as the median of the round ratios with their min-max spread.
"""

from __future__ import annotations

import json
import platform
import statistics
import sys
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent


@dataclass(frozen=True)
class Comparison:
    group: str
    variant: str
    baseline: str
    label: str
    goal: float | None  # the ratio must be at most this (None: informational)
    measure: str = "median"  # "median" of the benchmark's samples, or an extra_info key


COMPARISONS = (
    Comparison("enter/exit", "safe tracectx", "thunder tracectx", "tracectx enter/exit vs Thunder's tracectx", 1.0),
    Comparison("enter/exit", "safe tracectx", "bare set/reset", "tracectx enter/exit vs the floor (bare set/reset)", None),
    Comparison("enter/exit", "safe scratch_trace", "thunder detached_trace", "scratch_trace vs Thunder's detached_trace", 1.0),
    Comparison("enter/exit", "safe traceless", "thunder tracectx", "traceless vs Thunder's tracectx", None),
    Comparison("get_tracectx x1000", "installed", "not installed", "get_tracectx() installed vs not", 1.05),
    Comparison(
        "whole compile (fresh process)", "strict", "plain", "compile GPT fw+bw, install(STRICT) vs plain", 1.02, "compile"
    ),
    Comparison(
        "whole compile (fresh process)",
        "strict+audit",
        "plain",
        "compile GPT fw+bw, install(STRICT, audit=True) vs plain",
        1.10,
        "compile",
    ),
    Comparison("check_trace scaling", "3000 symbols", "300 symbols", "check_trace: 10x the symbols", 10.5),
    Comparison("lint the Thunder package", "safe-tracectx lint", "ast.parse", "lint Thunder vs ast.parse alone", 2.0),
)


def _value(bench: dict[str, Any], measure: str) -> float:
    return float(bench["stats"]["median"] if measure == "median" else bench["extra_info"][measure])


def _rows(data: dict[str, Any]) -> list[dict[str, Any]]:
    by_key: dict[tuple[str, str], dict[int, dict[str, Any]]] = defaultdict(dict)
    for bench in data["benchmarks"]:
        info = bench["extra_info"]
        by_key[(bench["group"], info["variant"])][info["round"]] = bench
    rows = []
    for comparison in COMPARISONS:
        variant = by_key.get((comparison.group, comparison.variant), {})
        baseline = by_key.get((comparison.group, comparison.baseline), {})
        rounds = sorted(variant.keys() & baseline.keys())
        if not rounds:
            continue
        ratios = [_value(variant[r], comparison.measure) / _value(baseline[r], comparison.measure) for r in rounds]
        median = statistics.median(ratios)
        rows.append(
            {
                "label": comparison.label,
                "ratio": median,
                "low": min(ratios),
                "high": max(ratios),
                "rounds": len(rounds),
                "baseline": statistics.median(_value(baseline[r], comparison.measure) for r in rounds),
                "goal": comparison.goal,
                "met": None if comparison.goal is None else median <= comparison.goal,
            }
        )
    compile_runs = by_key.get(("whole compile (fresh process)", "plain"), {})
    if compile_runs:
        fractions = [b["extra_info"]["checks"] / b["extra_info"]["compile"] for b in compile_runs.values()]
        traces = next(iter(compile_runs.values()))["extra_info"]["traces"]
        rows.append(
            {
                "label": f"check_trace over all {traces} traces of the compile, as a fraction of it",
                "ratio": statistics.median(fractions),
                "low": min(fractions),
                "high": max(fractions),
                "rounds": len(fractions),
                "baseline": statistics.median(b["extra_info"]["compile"] for b in compile_runs.values()),
                "goal": 0.05,
                "met": statistics.median(fractions) <= 0.05,
            }
        )
    return rows


def _unit(seconds: float) -> str:
    if seconds >= 1:
        return f"{seconds:.2f} s"
    if seconds >= 1e-3:
        return f"{seconds * 1e3:.2f} ms"
    return f"{seconds * 1e6:.3f} µs"


def render(data: dict[str, Any], rows: list[dict[str, Any]], command: str) -> str:
    machine = data.get("machine_info", {})
    versions = _versions()
    lines = [
        "# Performance",
        "",
        "Every figure is a ratio measured side by side in one run: each comparison ran as",
        "rounds of its variants next to each other (A B A B ...), the whole compile in a",
        "fresh process per measurement. The ratio is the median of the per-round ratios;",
        "the spread is their min-max. These machines are shared and noisy.",
        "",
        "![overheads](overheads.png)",
        "",
        "| figure | median ratio | spread | rounds | baseline (median) | goal | met |",
        "|---|---|---|---|---|---|---|",
    ]
    for row in rows:
        goal = "" if row["goal"] is None else f"≤ {row['goal']:g}"
        met = "" if row["met"] is None else ("yes" if row["met"] else "**no**")
        lines.append(
            f"| {row['label']} | {row['ratio']:.3f} | {row['low']:.3f}–{row['high']:.3f} | {row['rounds']} | "
            f"{_unit(row['baseline'])} | {goal} | {met} |"
        )
    notes = Path(__file__).with_name("NOTES.md")
    if notes.exists():
        lines += ["", "## Notes", "", notes.read_text(encoding="utf-8").rstrip()]
    lines += [
        "",
        f"Machine: {machine.get('cpu', {}).get('brand_raw', platform.processor() or '?')}, "
        f"{machine.get('cpu', {}).get('count', '?')} cores, {platform.system()} {platform.release()}, "
        f"Python {platform.python_version()}; {versions}.",
        "",
        f"Command: `{command}` (regenerates this page and the chart).",
        "",
    ]
    return "\n".join(lines)


def _versions() -> str:
    try:
        import thunder
        import torch

        return f"torch {torch.__version__}, lightning-thunder {thunder.__version__}"
    except ImportError:  # pragma: no cover
        return "versions unknown"


def chart(rows: list[dict[str, Any]], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    shown = [r for r in rows if r["goal"] is not None and r["goal"] <= 2.0]
    fig, ax = plt.subplots(figsize=(9, 0.55 * len(shown) + 1.2))
    labels = [r["label"] for r in shown]
    ratios = [r["ratio"] for r in shown]
    errors = [[r["ratio"] - r["low"] for r in shown], [r["high"] - r["ratio"] for r in shown]]
    colors = ["tab:green" if r["met"] else "tab:red" for r in shown]
    ax.barh(labels, ratios, xerr=errors, color=colors, alpha=0.8, capsize=3)
    for index, row in enumerate(shown):
        ax.plot([row["goal"], row["goal"]], [index - 0.4, index + 0.4], color="black", linewidth=1.5)
    ax.axvline(1.0, color="grey", linestyle=":", linewidth=1)
    ax.set_xlabel("ratio (median of rounds; bars: min-max; black tick: goal)")
    ax.invert_yaxis()
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print(__doc__, file=sys.stderr)
        return 2
    data = json.loads(Path(argv[0]).read_text())
    rows = _rows(data)
    command = "make bench"
    (ROOT / "docs" / "performance.md").write_text(render(data, rows, command), encoding="utf-8")
    chart(rows, ROOT / "docs" / "overheads.png")
    for row in rows:
        print(f"{row['label']:<62} {row['ratio']:.3f}  [{row['low']:.3f}-{row['high']:.3f}]  goal {row['goal']}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
