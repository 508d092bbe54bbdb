"""A pass run's page: its output traces (input beside output), new proxies linked to their call sites,
violations highlighted where they point, and, for several ranks, where the ranks' traces diverge."""

from __future__ import annotations

import re
from typing import Any

from safe_tracectx.report.html.model import Given, Report
from safe_tracectx.report.html.overview import NAV, violation_html
from safe_tracectx.auditlog.documents import site_text
from safe_tracectx.report.html.page import esc, page, table

__all__ = ["render_pass"]

MAX_ROWS = 3000
_CONTEXT = 3
_MAX_COLUMNS = 8
Row = list[Any]


def _names(trace: list[Row]) -> set[str]:
    return {str(name) for row in trace for name in (row[1] if len(row) > 1 else [])}


def _output(report: Report, member: int, label: str, name: str, new: bool, shape: Any, dtype: Any) -> str:
    extra = "" if shape is None and dtype is None else f' <span class="muted">{esc(shape if shape is not None else "")} {esc(dtype or "")}</span>'
    if not new:
        return f"{esc(name)}{extra}"
    creators = report.creators[member] if member < len(report.creators) else {}
    site = creators.get((label, name), creators.get(("", name)))
    if site is None:
        return f'<span class="new" title="created by this pass">{esc(name)}</span>{extra}'
    where = site_text(report.sites[site])
    return f'<a class="new" href="sites.html#site-{site}" title="created at {esc(where)}">{esc(name)}</a>{extra}'


def _mentioned(trace: list[Row], messages: list[str]) -> set[str]:
    """The output names a message mentions as a whole word (not one inside a longer mentioned name)."""
    found: set[str] = set()
    for name in _names(trace):
        if any(re.search(rf"(?<!\w){re.escape(name)}(?!\w)", message) for message in messages):
            found.add(name)
    return {name for name in found if not any(name != other and name in other for other in found)}


def _trace_table(report: Report, member: int, label: str, trace: list[Row], *, new: set[str], messages: list[str],
                 anchor: str, marks: dict[int, str]) -> str:
    rows, classes = [], []
    flagged = _mentioned(trace, messages)
    for index, row in enumerate(trace[:MAX_ROWS]):
        symbol, outs, shapes, dtypes = (list(row) + [[], [], []])[:4]
        shapes = shapes or [None] * len(outs)
        dtypes = dtypes or [None] * len(outs)
        cells = ", ".join(_output(report, member, label, str(o), str(o) in new, s, d) for o, s, d in zip(outs, shapes, dtypes))
        row_id = marks.get(index, f"{anchor}-b{index}")
        rows.append([f'<td id="{esc(row_id)}" class="num">{index}</td>', f"<td>{esc(symbol)}</td>", f"<td>{cells}</td>"])
        hit = index in marks or bool(flagged & {str(o) for o in outs})
        classes.append("diverges" if index in marks else ("violation" if hit else ""))
    more = f'<p class="muted">... {len(trace) - MAX_ROWS} more bound symbols</p>' if len(trace) > MAX_ROWS else ""
    return table(["#", "bound symbol", "outputs (shape dtype)"], rows, classes=classes, css="trace") + more


def _violations(report: Report, key: tuple[str, int]) -> tuple[str, list[str]]:
    """This pass run's violations, each once (HTML), and what to highlight in place: the names each is about,
    else its message (the output names it mentions)."""
    mine = [v for v in report.violations if v.key == key]
    return "".join(violation_html(report, v, link=False) for v in mine), [w for v in mine for w in v.names or [v.message]]


def _input_title(report: Report, given: Given) -> str:
    """Where the input beside an output came from: the page of the run that returned it, if a recorded one did."""
    if given.producer is None:
        return "Input (no recorded pass returned it: as it was given)"
    key = report.key_of.get(id(given.producer))
    if key is None or key not in report.runs:
        return f"Input (output of {esc(given.producer.get('label'))})"
    run = f" (run {key[1] + 1})" if key[1] else ""
    return f'Input (output of <a href="{esc(report.page_of(key))}">{esc(key[0])}{run}</a>)'


def _divergence_view(report: Report, key: tuple[str, int]) -> tuple[str, dict[tuple[int, int], str]]:
    """Per divergence of this pass: the members' rows around the first differing bound symbol, side by side."""
    parts: list[str] = []
    marks: dict[tuple[int, int], str] = {}
    for divergence in [d for d in report.divergences if (d["pass"], d["occurrence"]) == key]:
        carried = ""
        if divergence.get("carried"):
            first = next((d for d in report.divergences if not d.get("carried")), None)
            if first is not None and (first["pass"], first["occurrence"]) in report.runs:
                page_name = report.page_of((first["pass"], first["occurrence"]))
                carried = (f'<br><span class="muted">carried on from an earlier pass: where it starts is '
                           f'<a href="{esc(page_name)}#divergence">{esc(first["pass"])}</a></span>')
        parts.append(f'<div class="msg">{esc(divergence["message"])}{carried}</div>')
        index, trace_index = divergence.get("index"), divergence.get("trace")
        if index is None or trace_index is None:
            continue
        marks[(trace_index, index)] = f"div-{trace_index}-{index}"
        runs = report.runs[key]
        reference = next(i for i, run in enumerate(runs) if run is not None)

        def rows_of(position: int) -> list[Row]:
            run = runs[position]
            prints = (run.get("fingerprints") or []) if run is not None else []
            return list(prints[trace_index]) if trace_index < len(prints) else []

        base = rows_of(reference)
        shown = [reference] + [i for i in range(len(runs)) if i != reference and runs[i] is not None
                               and (rows_of(i)[index:index + 1] != base[index:index + 1])][: _MAX_COLUMNS - 1]
        start = max(0, index - _CONTEXT)
        columns = []
        for position in shown:
            rows = rows_of(position)
            window = rows[start:index + _CONTEXT + 1]
            html_rows, classes = [], []
            for offset, row in enumerate(window):
                html_rows.append([f'<td class="num">{start + offset}</td>', f"<td>{esc(row[0])}</td>",
                                  f"<td>{esc(', '.join(map(str, row[1])))}</td>"])
                classes.append("diverges" if start + offset == index else "")
            if index >= len(rows):
                html_rows.append([f'<td class="num">{index}</td>', '<td class="muted">(no bound symbol)</td>', "<td></td>"])
                classes.append("diverges")
            columns.append(f"<div><h3>{esc(report.members[position]['name'])}</h3>"
                           + table(["#", "bound symbol", "outputs"], html_rows, classes=classes, css="trace") + "</div>")
        parts.append(f'<h3>Output trace {trace_index}, bound symbol {index}</h3><div class="sides">{"".join(columns)}</div>')
    return "".join(parts), marks


def _output_section(report: Report, member: int, label: str, index: int, trace: list[Row], given: list[Given] | None,
                    words: list[str], marks: dict[int, str]) -> str:
    """Output trace ``index`` beside the trace the pass was given; the names in none of its inputs are new."""
    recorded = given is not None and all(g.fingerprint is not None for g in given)
    new = _names(trace) - set().union(*(_names(g.fingerprint or []) for g in given or [])) if recorded else set()
    output = _trace_table(report, member, label, trace, new=new, messages=words, anchor=f"t{index}", marks=marks)
    title = (f"<h3>Output trace {index} of {esc(report.members[member]['name'])}: {len(trace)} bound symbols, "
             + (f"{len(new)} new proxies" if recorded else "new proxies not known") + "</h3>")
    if given is None or not recorded:
        older = " (a data file of an older safe-tracectx)" if given is None else ""
        why = f"input not recorded{older}: the proxies this pass created are not told apart"
        return title + f'<p class="muted" id="input-{index}">{esc(why)}</p>' + output
    if not given:
        return title + f'<p class="muted" id="input-{index}">given no trace: every proxy is new</p>' + output
    source = given[min(index, len(given) - 1)]
    shown = _trace_table(report, member, "", source.fingerprint or [], new=set(), messages=[], anchor=f"in{index}", marks={})
    return (title + f'<div class="sides"><div><h3 id="input-{index}">{_input_title(report, source)}</h3>{shown}</div>'
            f"<div><h3>Output</h3>{output}</div></div>")


def render_pass(report: Report, key: tuple[str, int]) -> str:
    """One pass run's page (``pass-NNN.html``)."""
    label, occurrence = key
    runs = report.runs[key]
    member = next(i for i, run in enumerate(runs) if run is not None)
    run = runs[member]
    assert run is not None
    summary = table(
        ["rank / run", "seconds", "proxies created", "changed its trace", "violations", "kind", "role"],
        [[f"<td>{esc(m['name'])}</td>"] + (['<td colspan="6" class="muted">did not run</td>'] if r is None else [
            f'<td class="num">{float(r.get("seconds") or 0):.3f}</td>', f'<td class="num">{int(r.get("proxies") or 0)}</td>',
            f"<td>{esc(r.get('changed'))}</td>", f'<td class="num">{len(r.get("violations") or [])}</td>',
            f"<td>{esc(r.get('kind') or '')}</td>", f"<td>{esc(r.get('role') or '')}</td>"])
         for m, r in zip(report.members, runs)],
    )
    violations, words = _violations(report, key)
    divergence, marks = _divergence_view(report, key) if len(report.members) > 1 else ("", {})
    given = report.inputs[member].get(id(run))
    sections = [
        _output_section(report, member, label, index, trace, given, words, {i: n for (t, i), n in marks.items() if t == index})
        for index, trace in enumerate(run.get("fingerprints") or [])
    ]
    body = (
        f"<h2>{esc(label)}{'' if not occurrence else f' (run {occurrence + 1})'}</h2>{summary}"
        + (f"<h2>Violations</h2>{violations}" if violations else "")
        + (f'<h2 id="divergence">Rank divergence</h2>{divergence}' if divergence else "")
        + ("".join(sections) or '<p class="muted">No fingerprint recorded for this pass run.</p>')
        + '<p class="muted">Proxies this pass created are <span class="new">highlighted</span> and link to their call site.</p>'
    )
    return page(f"pass: {label}", body, nav=NAV)
