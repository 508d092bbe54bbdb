"""A static checker for trace-context safety in Thunder-style code.

Imports neither torch nor Thunder: it reads source as text, so it starts in
milliseconds and runs in pre-commit::

    >>> from safe_tracectx.lint import lint_source
    >>> [f.code for f in lint_source("tok = set_tracectx(t)\\nf()\\nreset_tracectx(tok)\\n")]
    ['STC001']
"""

from __future__ import annotations

from safe_tracectx.lint.checker import Finding, check_tree
from safe_tracectx.lint.files import DEFAULT_EXCLUDE, Skip
from safe_tracectx.lint.formatters import FORMATTERS, format_json, format_sarif, format_text
from safe_tracectx.lint.rules import ALL_CODES, AUDIT_CODES, DEFAULT_CODES, RULES, Rule
from safe_tracectx.lint.runner import (
    FileFinding,
    LintResult,
    PerFileIgnore,
    lint_bytes,
    lint_paths,
    lint_source,
    parse_codes,
    select_codes,
)

__all__ = [
    "ALL_CODES",
    "AUDIT_CODES",
    "DEFAULT_CODES",
    "DEFAULT_EXCLUDE",
    "FORMATTERS",
    "RULES",
    "FileFinding",
    "Finding",
    "LintResult",
    "PerFileIgnore",
    "Rule",
    "Skip",
    "check_tree",
    "format_json",
    "format_sarif",
    "format_text",
    "lint_bytes",
    "lint_paths",
    "lint_source",
    "parse_codes",
    "select_codes",
]
