"""The text report, rendered from an audit document (a live ``AuditLog.to_dict()`` or a saved JSON file).

One renderer serves ``AuditLog.report()``, ``safe-tracectx run``/``demo`` and
``safe-tracectx report DATA.json``::

    >>> from safe_tracectx.auditlog import AuditLog
    >>> from safe_tracectx.report import render_text
    >>> print(render_text(AuditLog().to_dict(), top=0).splitlines()[0])
    safe-tracectx audit report
"""

from __future__ import annotations

from typing import Any

__all__ = ["balance_lines", "pass_lines", "plural", "render_text", "site_text", "violation_lines"]

_OTHER = "(outside remat passes)"


def plural(count: int, noun: str) -> str:
    """``1 test``, ``2 tests``."""
    return f"{count} {noun}" + ("" if count == 1 else "s")


def site_text(site: dict[str, Any] | None) -> str:
    """``path:line in function`` of a JSON site."""
    return "(unknown)" if not site else f"{site['file']}:{site['line']} in {site['function']}"


def _phase_lines(document: dict[str, Any]) -> list[str]:
    """Work by phase (kind, runs, seconds, proxies, proxies per role) and by role."""
    phases: list[dict[str, Any]] = document.get("phases", [])
    if not phases:
        return []
    width = min(60, max(len(p["label"]) for p in phases))
    out = ["", "Work by phase (proxies: made while it was the innermost pass; fw/bw: its runs' proxies by role)"]
    out.append(f"  {'kind':<10} {'phase':<{width}}  runs  seconds  proxies     fw     bw")
    for phase in phases:
        roles = phase["by_role"]
        out.append(
            f"  {phase['kind']:<10} {phase['label']:<{width}}  {phase['runs']:>4}  {phase['seconds']:7.2f}  "
            f"{phase['proxies']:>7}  {roles['forward']:>5}  {roles['backward']:>5}"
        )
    runs: list[dict[str, Any]] = document.get("pass_runs", [])
    parts = []
    for role, name in (("forward", "forward"), ("backward", "backward"), (None, "joint or unknown")):
        mine = [r for r in runs if r["role"] == role]
        seconds = sum(r["seconds"] or 0.0 for r in mine)
        parts.append(f"{name} {len(mine)} runs, {seconds:.2f}s, {sum(r['proxies'] or 0 for r in mine)} proxies")
    out.append("  by role: " + "; ".join(parts))
    return out


def render_text(document: dict[str, Any], *, top: int = 15) -> str:
    """The report of one audit document: passes, proxies, call sites, set/reset balance, violations."""
    counts: dict[str, int] = document["counts"]
    out = ["safe-tracectx audit report", "=========================="]
    kinds = ", ".join(f"{kind} {counts[kind]}" for kind in sorted(counts)) or "none"
    out.append(
        f"events: {sum(counts.values())} ({kinds}); kept {document.get('kept', 0)}, dropped {document['dropped']}"
    )

    out += ["", "Remat passes, Transforms, executors' fusion passes and Thunder's other passes "
            "(each output trace validated with check_trace)"]
    out += pass_lines(document["passes"]) or ["  (no audited pass ran)"]
    out += _phase_lines(document)

    by_pass: dict[str, int] = document["proxies_by_pass"]
    out += ["", "Proxy creations by pass"]
    for name, count in sorted(by_pass.items(), key=lambda item: (-item[1], item[0])):
        out.append(f"  {count:>7}  {name}")

    sites: list[dict[str, Any]] = document["call_sites"]
    if top > 0:
        out += ["", f"Top {min(top, len(sites))} of {len(sites)} proxy-creating call sites"]
        for entry in sites[:top]:
            out.append(f"  {entry['count']:>7}  {entry['pass']:<28}  {site_text(entry['site'])}")
        out += ["", "Top 3 proxy-creating call sites of each pass"]
        for name in sorted(by_pass):
            if name == _OTHER:
                continue
            for entry in [e for e in sites if e["pass"] == name][:3]:
                out.append(f"  {entry['count']:>7}  {name:<28}  {site_text(entry['site'])}")

    traceless: list[dict[str, Any]] = document.get("traceless", [])
    if traceless:
        total = sum(entry["count"] for entry in traceless)
        out += ["", f"Proxies made traceless because no trace was active (lenient policy): {total}"]
        for entry in traceless[: max(top, 3)]:
            out.append(f"  {entry['count']:>7}  {site_text(entry['site'])}")

    out += ["", "Trace set/reset balance", *balance_lines(counts, document["leaked_sets"])]
    violations: list[dict[str, Any]] = document["violations"]
    out += ["", f"Violations ({len(violations)})", *(violation_lines(violations) or ["  (none)"])]
    return "\n".join(out)


def pass_lines(passes: dict[str, dict[str, Any]]) -> list[str]:
    """A line per audited pass: runs, runs that changed its trace, seconds, proxies, violations."""
    width = min(60, max([28, *map(len, passes)]))
    return [
        f"  {name:<{width}} runs {stats['runs']:>3}  changed its trace {stats['changed']:>3}  "
        f"{stats['seconds']:6.2f}s  proxies {stats.get('proxies', 0):>5}  violations {len(stats['violations']):>3}"
        for name, stats in sorted(passes.items())
    ]


def balance_lines(counts: dict[str, int], leaked: list[dict[str, Any]]) -> list[str]:
    """Sets, resets and sets never reset, with the line of each of those."""
    out = [f"  sets {counts.get('trace_set', 0)}, resets {counts.get('trace_reset', 0)}, never reset {len(leaked)}"]
    for entry in leaked:
        out.append(f"  never reset: set_tracectx({entry['trace']}) at {site_text(entry['site'])} [{entry['thread']}]")
    return out


def violation_lines(violations: list[dict[str, Any]]) -> list[str]:
    """Each violation: ``[error, action] message``, where, and its fix."""
    out = []
    for violation in violations:
        out.append(f"  [{violation['error']}, {violation['action']}] {violation['message']}")
        out.append(f"      at {site_text(violation['site'])}")
        out.append(f"      fix: {violation['fix']}")
    return out
