"""The text report, rendered from an audit document (a live ``AuditLog.to_dict()`` or a saved JSON file).

One renderer serves ``AuditLog.report()``, ``safe-tracectx run``/``demo`` and
``safe-tracectx report DATA.json``::

    >>> from safe_tracectx.auditlog.log import AuditLog
    >>> from safe_tracectx.report.text import render_text
    >>> print(render_text(AuditLog().to_dict(), top=0).splitlines()[0])
    safe-tracectx audit report
"""

from __future__ import annotations

from collections.abc import Mapping

from safe_tracectx.auditlog.document_types import AuditDocument
from safe_tracectx.auditlog.documents import AUDIT_SCHEMA, OUTSIDE_PASSES, rendered, site_text, validate
from safe_tracectx.report.sections import balance_lines, child_lines, not_audited, pass_lines, violation_lines
from safe_tracectx.report.thunderfx import thunderfx_lines

__all__ = ["render_text"]


def _phase_lines(document: AuditDocument) -> list[str]:
    """Work by phase (kind, runs, seconds, proxies, proxies per role) and by role."""
    phases = document.get("phases", [])
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
    runs = document.get("pass_runs", [])
    parts = []
    for role, name in (("forward", "forward"), ("backward", "backward"), (None, "joint or unknown")):
        mine = [r for r in runs if r["role"] == role]
        seconds = sum(r["seconds"] or 0.0 for r in mine)
        parts.append(f"{name} {len(mine)} runs, {seconds:.2f}s, {sum(r['proxies'] or 0 for r in mine)} proxies")
    out.append("  by role: " + "; ".join(parts))
    return out


def render_text(given: Mapping[str, object], *, top: int = 15) -> str:
    """The report of one audit document: passes, proxies, call sites, set/reset balance, violations. A document
    this safe-tracectx cannot read is a ``DataFileError`` that says why and what to do."""
    source = "the document given to render_text()"
    document = validate(given, source, (AUDIT_SCHEMA,))
    return rendered(document, source, lambda checked: _text(checked, top))


def _text(document: AuditDocument, top: int) -> str:
    counts = document["counts"]
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

    by_pass = document["proxies_by_pass"]
    out += ["", "Proxy creations by pass"]
    for name, count in sorted(by_pass.items(), key=lambda item: (-item[1], item[0])):
        out.append(f"  {count:>7}  {name}")

    sites = document["call_sites"]
    if top > 0:
        out += ["", f"Top {min(top, len(sites))} of {len(sites)} proxy-creating call sites"]
        for entry in sites[:top]:
            out.append(f"  {entry['count']:>7}  {entry['pass']:<28}  {site_text(entry['site'])}")
        out += ["", "Top 3 proxy-creating call sites of each pass"]
        for name in sorted(by_pass):
            if name == OUTSIDE_PASSES:
                continue
            for entry in [e for e in sites if e["pass"] == name][:3]:
                out.append(f"  {entry['count']:>7}  {name:<28}  {site_text(entry['site'])}")

    traceless = document.get("traceless", [])
    if traceless:
        total = sum(spot["count"] for spot in traceless)
        out += ["", f"Proxies made traceless because no trace was active (lenient policy): {total}"]
        for spot in traceless[: max(top, 3)]:
            out.append(f"  {spot['count']:>7}  {site_text(spot['site'])}")

    leaked = document["leaked_sets"]
    out += ["", "Trace set/reset balance", *balance_lines(counts, leaked)]
    children = document.get("child_processes")
    audited = [] if children is None else children["audited"]
    if children is not None:
        in_children = sum(len(member["audit"]["leaked_sets"]) for member in audited)
        line = f"  child processes: never reset {in_children} in {len(audited)} audited ({len(leaked) + in_children} in all)"
        if children["not_audited"]:
            line += f"; {not_audited(children['not_audited'])}"
        out.append(line)
    violations = document["violations"]
    in_children = sum(len(member["audit"]["violations"]) for member in audited)
    heading = f"Violations ({len(violations)}" + (f"; {in_children} in child processes)" if children else ")")
    out += ["", heading, *(violation_lines(violations) or ["  (none in this process)" if children else "  (none)"])]
    if children is not None:
        out += child_lines(children)
    return "\n".join(out)
