"""The text report, rendered from an audit document (a live ``AuditLog.to_dict()`` or a saved JSON file).

One renderer serves ``AuditLog.report()``, ``safe-tracectx run``/``demo`` and
``safe-tracectx report DATA.json``::

    >>> from safe_tracectx.auditlog.log import AuditLog
    >>> from safe_tracectx.report.text import render_text
    >>> print(render_text(AuditLog().to_dict(), top=0).splitlines()[0])
    safe-tracectx audit report
"""

from __future__ import annotations

from typing import Any

from safe_tracectx.report.thunderfx import thunderfx_lines

__all__ = ["balance_lines", "child_lines", "pass_lines", "plural", "render_text", "site_text", "violation_lines"]

_OTHER = "(outside remat passes)"


def plural(count: int, noun: str) -> str:
    """``1 test``, ``2 tests``, ``2 proxies``."""
    if count == 1:
        return f"{count} {noun}"
    return f"{count} {noun[:-1]}ies" if noun.endswith("y") and noun[-2:-1] not in "aeiou" else f"{count} {noun}s"


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
    out += thunderfx_lines(document)

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

    leaked: list[dict[str, Any]] = document["leaked_sets"]
    out += ["", "Trace set/reset balance", *balance_lines(counts, leaked)]
    children: dict[str, Any] | None = document.get("child_processes")
    audited: list[dict[str, Any]] = [] if children is None else children["audited"]
    if children is not None:
        in_children = sum(len(member["audit"]["leaked_sets"]) for member in audited)
        line = f"  child processes: never reset {in_children} in {len(audited)} audited ({len(leaked) + in_children} in all)"
        if children["not_audited"]:
            line += f"; {_not_audited(children['not_audited'])}"
        out.append(line)
    violations: list[dict[str, Any]] = document["violations"]
    in_children = sum(len(member["audit"]["violations"]) for member in audited)
    heading = f"Violations ({len(violations)}" + (f"; {in_children} in child processes)" if children else ")")
    out += ["", heading, *(violation_lines(violations) or ["  (none in this process)" if children else "  (none)"])]
    if children is not None:
        out += child_lines(children)
    return "\n".join(out)


def _not_audited(count: int) -> str:
    return f"{count} child process{' was' if count == 1 else 'es were'} not audited"


def child_lines(children: dict[str, Any], of: str = "") -> list[str]:
    """Each child process's counts, sets never reset and violations; and how many were not audited (``of``: whose
    children, in a combined report)."""
    audited: list[dict[str, Any]] = children["audited"]
    out = ["", f"Child processes{of} ({len(audited)} audited, {children['not_audited']} not audited)"]
    for member in audited:
        audit = member["audit"]
        counts = audit["counts"]
        out.append(
            f"  {member['name']}: proxies {counts.get('proxy_created', 0)}, sets {counts.get('trace_set', 0)}, "
            f"never reset {len(audit['leaked_sets'])}, violations {len(audit['violations'])}"
        )
        out += ["  " + line for line in balance_lines({}, audit["leaked_sets"])[1:]]
        for violation in audit["violations"]:
            out.append(f"    [{violation['error']}, {violation['action']}] {violation['message']}")
    if children["not_audited"]:
        out.append(
            f"  {_not_audited(children['not_audited'])}: each ended without writing its data (killed, os._exit "
            "in its own code, or still running when the program ended); their leaks are not in this report"
        )
    return out


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
