"""The text report of a sweep: what broke at which injection point, innermost frames last.

    >>> from safe_tracectx.sweep.text import render
    >>> from safe_tracectx.sweep.findings import SweepResult
    >>> print(render(SweepResult(0, {}, 0, {}, [], 0.0), "x.py").splitlines()[0])
    safe-tracectx sweep of x.py
"""

from __future__ import annotations

from safe_tracectx.hooks.faults import POINT_KINDS, point_name
from safe_tracectx.sweep.findings import SweepResult, frame_text

__all__ = ["render"]


def render(result: SweepResult, program: str, *, top: int = 20) -> str:
    """The text report of a sweep."""
    kinds = ", ".join(f"{POINT_KINDS.get(k, k)} {n}" for k, n in sorted(result.by_kind.items())) or "none"
    outcomes = ", ".join(f"{k} {n}" for k, n in sorted(result.outcomes.items())) or "none"
    broken = result.findings
    out = [
        f"safe-tracectx sweep of {program}",
        f"injection points: {result.points} ({kinds})",
        f"runs: {result.runs} in {result.seconds:.1f}s; outcomes: {outcomes}",
        f"broken: {len(broken)} injection point(s) left a trace active, a set open, a masked exception, "
        "a thread dead of it or a changed input trace, or their run took another path than the counting run",
    ]
    leaks = sum(f.leaks for f in broken)
    masked = sum(f.masked for f in broken)
    threads = sum(f.died_in_thread for f in broken)
    elsewhere = sum(f.other_path for f in broken)
    out.append(
        f"  leaks: {leaks}; masked or replaced exceptions: {masked}; threads dead of the fault: {threads}; "
        f"runs on another path (not checked): {elsewhere}"
    )
    for finding in broken[:top]:
        out += ["", f"point {finding.index}: {point_name(finding.kind, finding.pass_label)} ({finding.outcome})"]
        out += [f"  - {problem}" for problem in finding.problems]
        out.append("  injected at (innermost last):")
        out += [f"      {frame_text(frame)}" for frame in finding.stack[-8:]]
    if len(broken) > top:
        out.append(f"\n... and {len(broken) - top} more (--top, or --json FILE for all)")
    return "\n".join(out)
