"""``--fix`` and ``--diff``: input/expected-output files, idempotence, the reasons for what is left, the CLI."""

from __future__ import annotations

import io
import re
from pathlib import Path

import pytest

from safe_tracectx.exitcodes import ExitStatus
from safe_tracectx.lint import lint_source
from safe_tracectx.lint.command import main
from safe_tracectx.lint.fix import FIXABLE, fix_source

FIXES = Path(__file__).resolve().parent / "lint_cases" / "fixes"
INPUTS = sorted(FIXES.glob("*_in.py"))
_LEFT = re.compile(r"#\s*not fixed: (.*)$")


def expected_output(path: Path) -> str:
    out = path.with_name(path.name.replace("_in.py", "_out.py"))
    return (out if out.exists() else path).read_text(encoding="utf-8")


def test_there_are_fix_cases() -> None:
    assert {p.name for p in INPUTS} >= {"stc001_in.py", "stc002_in.py", "stc003_in.py", "unfixable_in.py"}


@pytest.mark.parametrize("path", INPUTS, ids=[p.name for p in INPUTS])
def test_fix_gives_the_expected_file_idempotently_and_lints_clean(path: Path) -> None:
    source = path.read_text(encoding="utf-8")
    result = fix_source(source, path.name)
    expected = expected_output(path)
    assert result.source == expected
    assert fix_source(expected, path.name).source == expected  # idempotent
    left = {(f.line, f.code) for f in lint_source(expected) if f.code in FIXABLE}
    assert left == {(u.line, u.code) for u in fix_source(expected).unfixed}  # all that is left is explained
    if expected != source:
        assert result.fixed == len([f for f in lint_source(source) if f.code in FIXABLE]) - len(left)
        assert not left


def test_unfixed_findings_say_why() -> None:
    path = FIXES / "unfixable_in.py"
    marks = {
        number: match.group(1)
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1)
        if (match := _LEFT.search(line))
    }
    result = fix_source(path.read_text(encoding="utf-8"))
    assert result.fixed == 0
    assert {u.line for u in result.unfixed} == set(marks)
    for unfixed in result.unfixed:
        assert marks[unfixed.line] in unfixed.reason, unfixed


def test_a_file_that_does_not_parse_is_left_alone() -> None:
    assert fix_source("def broken(:\n").source == "def broken(:\n"


def test_noqa_and_ignored_codes_are_not_fixed() -> None:
    source = "tok = set_tracectx(t)  # noqa: STC001\ng()\nreset_tracectx(tok)\n"
    assert fix_source(source).source == source
    plain = source.replace("  # noqa: STC001", "")
    assert fix_source(plain, codes=frozenset({"STC002"})).source == plain
    assert "finally:" in fix_source(plain).source


@pytest.fixture
def broken_file(tmp_path: Path) -> Path:
    path = tmp_path / "a.py"
    path.write_bytes((FIXES / "stc001_in.py").read_bytes())
    return path


def test_cli_fix_rewrites_the_file_and_reports_what_is_left(broken_file: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (broken_file.parent / "left.py").write_text("def f(t):\n    tok = set_tracectx(t)\n    return tok\n")
    assert main(["--fix", str(broken_file.parent)]) == ExitStatus.FINDINGS  # left.py cannot be fixed
    captured = capsys.readouterr()
    assert broken_file.read_text() == (FIXES / "stc001_out.py").read_text()
    assert "fixed 5 finding(s) in 1 file(s)" in captured.err
    assert "left.py:2: STC001 not fixed: no reset_tracectx(tok) in this function" in captured.err
    assert "left.py:2:11: STC001" in captured.out and "a.py:" not in captured.out.replace("left.py", "")
    assert main(["--fix", str(broken_file)]) == ExitStatus.OK  # nothing more to do
    assert "fixed 0 finding(s) in 0 file(s)" in capsys.readouterr().err


def test_cli_diff_changes_nothing(broken_file: Path, capsys: pytest.CaptureFixture[str]) -> None:
    before = broken_file.read_bytes()
    assert main(["--diff", str(broken_file)]) == ExitStatus.FINDINGS
    captured = capsys.readouterr()
    assert broken_file.read_bytes() == before
    assert captured.out.startswith(f"--- a/{broken_file}\n+++ b/{broken_file}\n")
    assert "+    try:\n" in captured.out and "+        reset_tracectx(token)\n" in captured.out
    assert "would fix 5 finding(s) in 1 file(s)" in captured.err
    broken_file.write_text((FIXES / "stc001_out.py").read_text())
    assert main(["--diff", str(broken_file)]) == ExitStatus.OK
    assert capsys.readouterr().out == ""


def test_cli_fix_keeps_the_encoding_and_line_endings(tmp_path: Path) -> None:
    path = tmp_path / "latin.py"
    path.write_bytes(b"# -*- coding: latin-1 -*-\r\nname = '\xe9'\r\ntok = set_tracectx(t)\r\ng()\r\nreset_tracectx(tok)\r\n")
    assert main(["--fix", str(path)]) == ExitStatus.OK
    data = path.read_bytes()
    assert b"name = '\xe9'\r\n" in data and b"try:\r\n    g()\r\nfinally:\r\n    reset_tracectx(tok)\r\n" in data


def test_cli_fix_of_standard_input_prints_the_fixed_source(monkeypatch: pytest.MonkeyPatch, capsysbinary: pytest.CaptureFixture[bytes]) -> None:
    source = (FIXES / "stc003_in.py").read_bytes()
    monkeypatch.setattr("sys.stdin", io.TextIOWrapper(io.BytesIO(source)))
    assert main(["--fix", "-"]) == ExitStatus.OK
    assert capsysbinary.readouterr().out == (FIXES / "stc003_out.py").read_bytes()


def test_a_set_continued_with_a_backslash_is_fixed_like_one_on_its_own_line() -> None:
    source = "def f(t):\n    tok = \\\n        set_tracectx(t)\n    g()\n    reset_tracectx(tok)\n"
    result = fix_source(source)
    assert result.unfixed == [] and result.fixed == 1
    assert result.source.endswith("    try:\n        g()\n    finally:\n        reset_tracectx(tok)\n")


def test_cli_diff_names_the_lines_of_the_file_as_it_is(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """--diff writes nothing, so a finding it leaves is named at its line in the file, not in the fixed text."""
    path = tmp_path / "two.py"
    path.write_text("def f(t):\n    tok = set_tracectx(t)\n    g()\n    reset_tracectx(tok)\n\n\ndef h(t):\n    set_tracectx(t)\n")
    assert main(["--diff", str(path)]) == ExitStatus.FINDINGS
    assert f"{path}:8: STC001 not fixed: the token is not bound to a plain name" in capsys.readouterr().err
    assert main(["--fix", str(path)]) == ExitStatus.FINDINGS  # the file is the fixed text now: its line
    assert f"{path}:10: STC001 not fixed: the token is not bound to a plain name" in capsys.readouterr().err
