"""Eval files, the flake8-bugbear way: each line of tests/lint_cases/*.py that must give a finding says so.

A line ending in ``# STC001`` (or several codes, ``# STC001 STC100``) must give exactly those findings;
``STC100(guarded)`` is an STC100 finding that a trace context guards. Every other line must give none.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from safe_tracectx.lint import lint_paths, select_codes

CASES = Path(__file__).resolve().parent / "lint_cases"
CASE_FILES = sorted(p for p in CASES.glob("*.py") if p.name not in {"conftest.py", "__init__.py"})
_MARK = re.compile(r"#\s*(STC\d{3}(?:\(guarded\))?(?:[\s,]+STC\d{3}(?:\(guarded\))?)*)\s*$")


def expected_marks(path: Path) -> set[tuple[int, str]]:
    """The (line, code) pairs the file's comments ask for."""
    marks: set[tuple[int, str]] = set()
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        match = _MARK.search(line)
        if match:
            marks |= {(number, code) for code in re.split(r"[\s,]+", match.group(1))}
    return marks


def found_marks(path: Path) -> set[tuple[int, str]]:
    """The (line, code) pairs the linter reports, with every rule on (STC100 included)."""
    result = lint_paths([str(path)], codes=select_codes(audit=True))
    return {
        (f.finding.line, f.finding.code + ("(guarded)" if f.finding.guarded else "")) for f in result.findings
    }


def test_there_are_case_files_and_marks() -> None:
    assert {p.name for p in CASE_FILES} >= {"stc001.py", "stc002.py", "stc003.py", "stc100.py"}
    assert expected_marks(CASES / "stc001.py")
    assert expected_marks(CASES / "stc100.py") >= {(8, "STC100"), (10, "STC100(guarded)")}


@pytest.mark.parametrize("path", CASE_FILES, ids=[p.name for p in CASE_FILES])
def test_each_case_file_gives_exactly_the_findings_its_lines_are_marked_with(path: Path) -> None:
    expected, found = expected_marks(path), found_marks(path)
    assert found == expected, f"missing: {sorted(expected - found)}; unexpected: {sorted(found - expected)}"
