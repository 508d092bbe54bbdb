"""The text report of the pytest plugin's own report (schema ``safe-tracectx/pytest``): a section per test.

Each test's section has what the plugin keeps of it: proxies, its audited passes,
the set/reset balance with the line of every set never reset, and its violations::

    >>> from safe_tracectx.report.pytest_document import render_pytest
    >>> test = {"counts": {"proxy_created": 2}, "passes": {}, "violations": [], "leaked_sets": [], "traceless": []}
    >>> doc = {"schema": "safe-tracectx/pytest", "version": 2, "mode": "audit", "tests": {"t.py::test_a": test}}
    >>> print(render_pytest(doc).splitlines()[2])
    mode audit: 1 test audited, 2 proxies created, 0 trace sets; 0 tests with violations
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from safe_tracectx.auditlog.document_types import AuditDocument
from safe_tracectx.auditlog.documents import PYTEST_SCHEMA, RENDER_ERRORS, damaged, per_test_audits, site_text, validate
from safe_tracectx.report.sections import balance_lines, pass_lines, plural, violation_lines

__all__ = ["render_pytest", "totals_line"]


def _indented(lines: list[str]) -> list[str]:
    return ["  " + line for line in lines]


def _test_lines(audit: AuditDocument) -> list[str]:
    counts = audit["counts"]
    violations = audit["violations"]
    traceless = audit.get("traceless", [])
    out = ["", audit["test"], f"  proxies {counts.get('proxy_created', 0)}, violations {len(violations)}"]
    if audit["passes"]:
        out += ["  passes:", *_indented(pass_lines(audit["passes"]))]
    out += balance_lines(counts, audit["leaked_sets"])
    if traceless:
        total = sum(entry["count"] for entry in traceless)
        out.append(f"  proxies made traceless (no trace active, lenient policy): {total}")
        out += [f"  {entry['count']:>7}  {site_text(entry['site'])}" for entry in traceless[:3]]
    return out + violation_lines(violations)


def totals_line(mode: object, tests: Iterable[Mapping[str, Any]]) -> str:
    """``mode audit: 3 tests audited, ...``: the plugin's terminal summary and this report say it alike."""
    tests = list(tests)
    flagged = [test for test in tests if test["violations"] or test["leaked_sets"]]
    proxies = sum(test["counts"].get("proxy_created", 0) for test in tests)
    sets = sum(test["counts"].get("trace_set", 0) for test in tests)
    return (f"mode {mode}: {plural(len(tests), 'test')} audited, {proxies} proxies created, "
            f"{plural(sets, 'trace set')}; {plural(len(flagged), 'test')} with violations")


def render_pytest(given: Mapping[str, object], *, path: str = "the document given to render_pytest()") -> str:
    """The report: totals over the tests, then a section per test in the report's order (``path`` names the
    document in the ``DataFileError`` of one this safe-tracectx cannot read)."""
    document = validate(given, path, (PYTEST_SCHEMA,))
    audits = per_test_audits(document, path)
    try:
        out = ["safe-tracectx pytest report", "===========================", totals_line(document.get("mode"), audits)]
        for audit in audits:
            out += _test_lines(audit)
    except RENDER_ERRORS as error:  # damaged deeper than validate() checks
        raise damaged(document, path, error) from error
    return "\n".join(out)
