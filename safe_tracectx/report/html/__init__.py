"""The HTML report: static files (no script, no network asset) that open from disk.

``write_html(document, folder)`` takes an audit document (``run --json``, a
rank's data file) or a combined one (``safe-tracectx combine``) and writes
``index.html`` (overview: ranks, passes with time and proxies, violations,
divergence), one page per pass run (its output traces beside the traces it was
given, the proxies it created linked to their call site), ``sites.html`` and
``style.css``. Written into a folder again, it removes the pages it wrote there
before (listed in ``.safe-tracectx-html.json``), and only those.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from safe_tracectx.auditlog.documents import AUDIT_SCHEMA, COMBINED_SCHEMA, RENDER_ERRORS, damaged, validate
from safe_tracectx.report.html.model import build
from safe_tracectx.report.html.overview import render_index, render_sites
from safe_tracectx.report.html.owned_files import ReportFolderError, check_writable, owned, record_owned, remove_stale, write_file
from safe_tracectx.report.html.page import STYLE
from safe_tracectx.report.html.traces import render_pass

__all__ = ["ReportFolderError", "write_html"]


def write_html(given: Mapping[str, object], folder: str | Path) -> Path:
    """Write the report's files into ``folder`` (created if needed); the path of ``index.html``. A folder holding
    a file of the user's under a name the report writes is refused (``ReportFolderError``) before anything is
    written; a document this safe-tracectx cannot read is a ``DataFileError`` that says why and what to do."""
    source = "the document given to write_html()"
    document = validate(given, source, (AUDIT_SCHEMA, COMBINED_SCHEMA))
    try:  # every page rendered before the folder is touched: a document damaged deeper than checked writes nothing
        report = build(document)
        pages = {"style.css": STYLE, "index.html": render_index(report), "sites.html": render_sites(report)}
        for key in report.keys:
            pages[report.page_of(key)] = render_pass(report, key)
    except RENDER_ERRORS as error:
        raise damaged(document, source, error) from error
    out = Path(folder)
    out.mkdir(parents=True, exist_ok=True)
    before = owned(out)
    check_writable(out, before, list(pages))
    for name, text in pages.items():
        write_file(out / name, text)
    remove_stale(out, before, list(pages))  # an earlier, bigger run's pages, never another file
    record_owned(out, list(pages))
    return out / "index.html"
