"""Output formats of ``safe-tracectx lint``: text, json and SARIF 2.1.0.

    >>> from safe_tracectx.lint.runner import LintResult
    >>> print(format_text(LintResult([], 3)))
    no findings in 3 files
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any, Final

from safe_tracectx.lint.rules import RULES
from safe_tracectx.lint.runner import LintResult

__all__ = ["FORMATTERS", "JSON_SCHEMA_VERSION", "format_json", "format_sarif", "format_text", "statistics", "with_statistics"]

JSON_SCHEMA_VERSION: Final = 1
_INFO_URI: Final = "https://pypi.org/project/safe-tracectx/"


def format_text(result: LintResult) -> str:
    """``path:line:col: CODE message`` per finding, the fix of each rule seen, and a summary."""
    lines = [f"{f.path}:{f.finding.line}:{f.finding.col}: {f.finding.code} {f.finding.message}" for f in result.findings]
    files = len({f.path for f in result.findings})
    for code in sorted({f.finding.code for f in result.findings}):
        lines.append(f"{code} fix: {RULES[code].fix}")
    if result.findings:
        informational = len(result.findings) - len(result.failures)
        note = f" ({informational} informational: guarded proxy-creating calls)" if informational else ""
        lines.append(f"{len(result.findings)} finding(s) in {files} of {result.files_checked} files{note}")
    else:
        lines.append(f"no findings in {result.files_checked} files")
    return "\n".join(lines)


def format_json(result: LintResult) -> str:
    """``{"version": 1, "files_checked": N, "findings": [...]}``; each finding has path, line, col, code, name, message, fix."""
    findings: list[dict[str, Any]] = []
    for item in result.findings:
        f = item.finding
        entry: dict[str, Any] = {
            "path": item.path,
            "line": f.line,
            "col": f.col,
            "code": f.code,
            "name": RULES[f.code].name,
            "message": f.message,
            "fix": f.fix,
        }
        if f.guarded is not None:
            entry["guarded"] = f.guarded
        findings.append(entry)
    document = {
        "version": JSON_SCHEMA_VERSION,
        "files_checked": result.files_checked,
        "findings": findings,
        "skipped": [{"path": skip.path, "reason": skip.reason} for skip in result.skipped],
    }
    return json.dumps(document, indent=2)


def statistics(result: LintResult) -> dict[str, int]:
    """How many findings of each code, by code."""
    counts: dict[str, int] = {}
    for item in sorted(result.findings, key=lambda f: f.finding.code):
        counts[item.finding.code] = counts.get(item.finding.code, 0) + 1
    return counts


def with_statistics(report: str, result: LintResult, format: str) -> str:
    """The report with the count of each code: lines ``   3 STC001 unguarded-set-tracectx`` after the
    text report, or a ``"statistics"`` object in the JSON one.

        >>> print(with_statistics("report", LintResult([], 0), "text"))
        report
        no findings to count
    """
    counts = statistics(result)
    if format == "json":
        document = json.loads(report)
        document["statistics"] = counts
        return json.dumps(document, indent=2)
    if format != "text":
        raise ValueError(f"no statistics for --format {format}")
    lines = [f"{count:>4} {code} {RULES[code].name}" for code, count in counts.items()] or ["no findings to count"]
    return "\n".join([report, *lines])


def format_sarif(result: LintResult) -> str:
    """A SARIF 2.1.0 log with one run, the rules as ``tool.driver.rules`` and one result per finding."""
    from safe_tracectx import __version__

    rules = [
        {
            "id": rule.code,
            "name": rule.name,
            "shortDescription": {"text": rule.summary},
            "help": {"text": f"Fix: {rule.fix}"},
            "defaultConfiguration": {"level": "note" if rule.audit_only else "warning"},
        }
        for rule in RULES.values()
    ]
    index = {code: i for i, code in enumerate(RULES)}
    results = [
        {
            "ruleId": item.finding.code,
            "ruleIndex": index[item.finding.code],
            "level": "note" if RULES[item.finding.code].audit_only else "warning",
            "message": {"text": item.finding.message},
            "locations": [
                {
                    "physicalLocation": {
                        "artifactLocation": {"uri": Path(item.path).as_posix()},
                        "region": {"startLine": item.finding.line, "startColumn": item.finding.col},
                    }
                }
            ],
        }
        for item in result.findings
    ]
    log = {
        "$schema": "https://json.schemastore.org/sarif-2.1.0.json",
        "version": "2.1.0",
        "runs": [
            {
                "tool": {
                    "driver": {
                        "name": "safe-tracectx",
                        "version": __version__,
                        "informationUri": _INFO_URI,
                        "rules": rules,
                    }
                },
                "results": results,
            }
        ],
    }
    return json.dumps(log, indent=2)


FORMATTERS: Final[dict[str, Callable[[LintResult], str]]] = {
    "text": format_text,
    "json": format_json,
    "sarif": format_sarif,
}
