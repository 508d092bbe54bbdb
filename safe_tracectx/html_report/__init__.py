"""The HTML report: static files (no script, no network asset) that open from disk.

``write_html(document, folder)`` takes an audit document (``run --json``, a
rank's data file) or a combined one (``safe-tracectx combine``) and writes
``index.html`` (overview: ranks, passes with time and proxies, violations,
divergence), one page per pass run (its output traces, input beside output,
the proxies it created linked to their call site), ``sites.html`` and ``style.css``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from safe_tracectx.html_report.model import build
from safe_tracectx.html_report.overview import render_index, render_sites
from safe_tracectx.html_report.page import STYLE
from safe_tracectx.html_report.traces import render_pass

__all__ = ["write_html"]


def write_html(document: dict[str, Any], folder: str | Path) -> Path:
    """Write the report's files into ``folder`` (created if needed); the path of ``index.html``."""
    out = Path(folder)
    out.mkdir(parents=True, exist_ok=True)
    report = build(document)
    (out / "style.css").write_text(STYLE, encoding="utf-8")
    (out / "index.html").write_text(render_index(report), encoding="utf-8")
    (out / "sites.html").write_text(render_sites(report), encoding="utf-8")
    for key in report.keys:
        (out / report.page_of(key)).write_text(render_pass(report, key), encoding="utf-8")
    return out / "index.html"
