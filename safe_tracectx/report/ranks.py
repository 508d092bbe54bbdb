"""The text report of a combined document: one column per member (rank or run), then the divergences.

    >>> from safe_tracectx.auditlog.combine import combine, member_document
    >>> doc = {"schema": "safe-tracectx/audit", "version": 2, "counts": {}, "violations": [], "leaked_sets": []}
    >>> text = render_combined(combine([member_document(dict(doc, rank={"rank": r}), "f") for r in (0, 1)]))
    >>> text.splitlines()[3].split()
    ['rank', '0', 'rank', '1']
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

from safe_tracectx.auditlog.combine import carried_runs
from safe_tracectx.auditlog.document_types import AuditDocument, CombinedDocument
from safe_tracectx.auditlog.documents import COMBINED_SCHEMA, pass_runs, rendered, validate
from safe_tracectx.report.sections import child_lines, plural

__all__ = ["pass_totals", "render_combined"]

_LABEL = 40
_COLUMN = 12


def pass_totals(document: AuditDocument) -> dict[str, tuple[int, int, float]]:
    """Per pass label: runs, proxies created, seconds (from ``pass_runs``, else the audit's ``passes``)."""
    totals: dict[str, tuple[int, int, float]] = {}
    runs = pass_runs(document)
    if runs:
        for run in runs:
            label = str(run.get("label"))
            n, proxies, seconds = totals.get(label, (0, 0, 0.0))
            totals[label] = (n + 1, proxies + int(run.get("proxies") or 0), seconds + float(run.get("seconds") or 0.0))
        return totals
    for label, stats in document.get("passes", {}).items():
        totals[label] = (int(stats.get("runs", 0)), int(stats.get("proxies", 0)), float(stats.get("seconds", 0.0)))
    return totals


def _cut(text: str, width: int) -> str:
    return text if len(text) <= width else text[: width - 1] + "~"


def _row(label: str, cells: list[str]) -> str:
    return f"  {_cut(label, _LABEL - 2):<{_LABEL - 2}}" + "".join(f"{_cut(c, _COLUMN - 1):>{_COLUMN}}" for c in cells)


def render_combined(given: Mapping[str, object], *, top: int = 15) -> str:
    """Members side by side (counts, passes), then each rank divergence with what each member had. A document
    this safe-tracectx cannot read is a ``DataFileError`` that says why and what to do."""
    source = "the document given to render_combined()"
    combined = validate(given, source, (COMBINED_SCHEMA,))
    return rendered(combined, source, lambda checked: _combined(checked, top))


def _combined(combined: CombinedDocument, top: int) -> str:
    members = combined["members"]
    audits = [m["audit"] for m in members]
    world = combined.get("world_size")
    out = [
        "safe-tracectx combined report",
        "=============================",
        f"{len(members)} data files" + ("" if world is None else f", world size {world}"),
        " " * _LABEL + "".join(f"{_cut(m['name'], _COLUMN - 1):>{_COLUMN}}" for m in members),
    ]
    if world is not None and len(members) != world:
        out.insert(3, f"warning: {len(members)} data files for a world size of {world}")
    rows: tuple[tuple[str, Callable[[AuditDocument], int]], ...] = (
        ("proxies created", lambda d: d.get("counts", {}).get("proxy_created", 0)),
        ("trace sets", lambda d: d.get("counts", {}).get("trace_set", 0)),
        ("sets never reset", lambda d: len(d.get("leaked_sets", []))),
        ("violations", lambda d: len(d.get("violations", []))),
        ("pass runs", lambda d: len(pass_runs(d)) or sum(s.get("runs", 0) for s in d.get("passes", {}).values())),
    )
    for title, value in rows:
        out.append(_row(title, [str(value(d)) for d in audits]))
    totals = [pass_totals(d) for d in audits]
    labels = list(dict.fromkeys(label for t in totals for label in t))  # in the order the passes ran
    out += ["", "Passes: runs/proxies, seconds"]
    for label in labels:
        out.append(_row(label, [f"{t[label][0]}/{t[label][1]}" if label in t else "-" for t in totals]))
        out.append(_row("", [f"{t[label][2]:.2f}s" if label in t else "" for t in totals]))
    if not labels:
        out.append("  (no pass runs recorded)")
    for member in members:
        violations = member["audit"].get("violations", [])
        if violations:
            out += ["", f"Violations of {member['name']} ({len(violations)})"]
            out += [f"  [{v.get('error')}, {v.get('action')}] {v.get('message')}" for v in violations[: max(top, 1)]]
    for member in members:
        children = member["audit"].get("child_processes")
        if isinstance(children, dict):
            out += child_lines(children, of=f" of {member['name']}")
    divergences = combined.get("divergences", [])
    out += ["", f"Rank divergence ({len(divergences)})"]
    for divergence in [d for d in divergences if not d.get("carried")]:
        out.append(f"  [{divergence['error']}] {divergence['message']}")
        out.append(f"      fix: {divergence['fix']}")
    carried = carried_runs(divergences)
    if carried:
        out.append(f"  carried on by {plural(len(carried), 'later pass run')}: {', '.join(carried)}")
    if not divergences:
        out.append("  (none: every member built the same traces)" if len(members) > 1 else "  (one member: nothing to compare)")
    return "\n".join(out)
