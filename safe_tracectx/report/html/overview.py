"""The overview page (ranks, passes with time and proxies, violations, divergence) and the call-site page."""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from safe_tracectx.auditlog.document_types import Site
from safe_tracectx.auditlog.documents import pass_runs, rank_of, site_text
from safe_tracectx.report.html.model import Listed, Report
from safe_tracectx.report.html.page import esc, page, table
from safe_tracectx.report.sections import child_lines, plural

__all__ = ["NAV", "render_index", "render_sites", "violation_html"]

NAV = [("index.html", "Overview"), ("sites.html", "Call sites")]


def _num(value: Any) -> str:
    return f'<td class="num">{esc(value)}</td>'


def _members_table(report: Report) -> str:
    rows = []
    for position, member in enumerate(report.members):
        audit = member["audit"]
        rank: Mapping[str, Any] = rank_of(audit) or {}
        violations = sum(1 for v in report.violations if v.member == position)
        badge = f'<span class="badge {"bad" if violations else "ok"}">{violations}</span>'
        rows.append(
            [
                f"<td>{esc(member['name'])}</td>",
                f"<td><code>{esc(member['source'])}</code></td>",
                f"<td>{esc(rank.get('host', ''))}</td>",
                _num(rank.get("world_size", "")),
                _num(audit.get("counts", {}).get("proxy_created", 0)),
                _num(len(pass_runs(audit))),
                _num(len(audit.get("leaked_sets", []))),
                f"<td>{badge}</td>",
            ]
        )
    headers = ["rank / run", "data file", "host", "world size", "proxies", "pass runs", "never reset", "violations"]
    return table(headers, rows)


def _passes_table(report: Report) -> str:
    diverged = {(d["pass"], d["occurrence"]) for d in report.divergences}
    rows, classes = [], []
    for key in report.keys:
        label, occurrence = key
        cells = [f'<td><a href="{esc(report.page_of(key))}">{esc(label)}</a>'
                 + (f' <span class="muted">#{occurrence + 1}</span>' if occurrence else "") + "</td>"]
        for run in report.runs[key]:
            if run is None:
                cells.append('<td class="muted">did not run</td>')
                continue
            text = f"{float(run.get('seconds') or 0):.3f}s, {plural(int(run.get('proxies') or 0), 'proxy')}"
            if run.get("violations"):
                text += f", {plural(len(run['violations']), 'violation')}"
            cells.append(f'<td class="num">{esc(text)}</td>')
        rows.append(cells)
        classes.append("diverges" if key in diverged else ("violation" if any(
            r is not None and r.get("violations") for r in report.runs[key]) else ""))
    if not rows:
        return '<p class="muted">No pass runs recorded.</p>'
    return table(["pass (time, proxies created)"] + [m["name"] for m in report.members], rows, classes=classes)


def violation_html(report: Report, violation: Listed, *, link: bool) -> str:
    """One violation: member, error and action, message, how often, site and fix; ``link``: to its pass page."""
    head = f"<b>{esc(report.members[violation.member]['name'])}</b>"
    if link and violation.key is not None and violation.key in report.runs:
        label, occurrence = violation.key
        head += (f' <a href="{esc(report.page_of(violation.key) + "#" + violation.anchor)}">{esc(label)}'
                 f'{f" (run {occurrence + 1})" if occurrence else ""}</a>')
    tag = f" [{esc(violation.error)}, {esc(violation.action)}]" if violation.error else ""
    times = f" ({violation.count} times)" if violation.count > 1 else ""
    notes = []
    if violation.site:
        notes.append(f"at {esc(site_text(violation.site))}")
    if violation.fix:
        notes.append(f"fix: {esc(violation.fix)}")
    if violation.run_unknown:
        notes.append("this pass ran more than once; which run found it is not recorded")
    extra = f'<br><span class="muted">{"; ".join(notes)}</span>' if notes else ""
    return f'<div class="msg" id="{esc(violation.anchor)}">{head}{tag}{times}: {esc(violation.message)}{extra}</div>'


def _violations(report: Report) -> str:
    parts = [violation_html(report, violation, link=True) for violation in report.violations]
    return "".join(parts) or '<p><span class="badge ok">none</span></p>'


def _divergences(report: Report) -> str:
    if len(report.members) < 2:
        return '<p class="muted">One data file: nothing to compare (combine the ranks\' data files).</p>'
    if not report.divergences:
        return '<p><span class="badge ok">none</span> every rank built the same traces.</p>'
    parts, carried = [], []
    for divergence in report.divergences:
        key = (divergence["pass"], divergence["occurrence"])
        anchor = "#divergence" if divergence.get("index") is None else f"#div-{divergence['trace']}-{divergence['index']}"
        link = f'<a href="{esc(report.page_of(key) + anchor)}">{esc(divergence["pass"])}</a>' if key in report.runs else ""
        if divergence.get("carried"):
            carried.append(link or esc(divergence["pass"]))
        else:
            parts.append(f'<div class="msg">{link}: {esc(divergence["message"])}<br>'
                         f'<span class="muted">fix: {esc(divergence["fix"])}</span></div>')
    if carried:
        parts.append(f"<p>Carried on by the later passes: {', '.join(carried)}</p>")
    return "".join(parts)


def render_index(report: Report) -> str:
    """``index.html``."""
    world = "" if report.world_size is None else f", world size {report.world_size}"
    body = (
        f"<h2>Ranks and runs ({len(report.members)} data files{esc(world)})</h2>{_members_table(report)}"
        f"<h2>Passes</h2>{_passes_table(report)}"
        f'<h2 id="divergence">Rank divergence ({len(report.divergences)})</h2>{_divergences(report)}'
        f"<h2>Violations</h2>{_violations(report)}"
        f"{_child_processes(report)}"
    )
    return page("safe-tracectx report", body, nav=NAV)


def _child_processes(report: Report) -> str:
    """Each member's child processes (``run``'s multiprocessing workers), as the text report has them."""
    parts = []
    for member in report.members:
        children = member["audit"].get("child_processes")
        if isinstance(children, dict):
            title, *lines = child_lines(children, of=f" of {member['name']}")[1:]
            parts.append(f"<h2>{esc(title)}</h2><pre>{esc(chr(10).join(lines))}</pre>")
    return "".join(parts)


def _source_line(site: Site) -> str:
    path, line = str(site.get("file")), site.get("line")
    try:
        if isinstance(line, int) and os.path.isfile(path) and os.path.getsize(path) < 2_000_000:
            with open(path, encoding="utf-8", errors="replace") as source:
                for number, text in enumerate(source, start=1):
                    if number == line:
                        return text.strip()
    except OSError:
        pass
    return ""


def _file_link(site: Site, label: str) -> str:
    """``label`` linked to the site's file (a ``file:`` URI, every special character encoded), if it names one."""
    name = str(site.get("file"))
    if name.startswith("<"):  # <stdin>, <string>: no file to open
        return label
    return f'<a href="{esc(Path(os.path.abspath(name)).as_uri())}">{label}</a>'


def render_sites(report: Report) -> str:
    """``sites.html``: every proxy-creating call site a pass page links to, with its source line when readable."""
    rows = []
    for index, site in enumerate(report.sites):
        label = f"<code>{esc(site_text(site))}</code>"
        rows.append(
            [
                f'<td id="site-{index}" class="num">{index}</td>',
                f"<td>{_file_link(site, label)}</td>",
                f"<td><code>{esc(_source_line(site))}</code></td>",
            ]
        )
    body = "<h2>Proxy-creating call sites</h2>" + (table(["#", "site", "source"], rows) if rows else
                                                    '<p class="muted">No proxy creation events were kept.</p>')
    return page("safe-tracectx report: call sites", body, nav=NAV)
