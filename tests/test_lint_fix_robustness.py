"""``--fix`` and ``--diff`` on hostile input: no traceback, every file handled, the exit status as for lint."""

from __future__ import annotations

import io
from pathlib import Path

import pytest

from safe_tracectx.exitcodes import ExitStatus
from safe_tracectx.lint.command import main
from safe_tracectx.lint.fix import fix_source

BROKEN = "from thunder.core.trace import reset_tracectx, set_tracectx\ndef f(t):\n    tok = set_tracectx(t)\n    g()\n    reset_tracectx(tok)\n"
FIXED = BROKEN.replace("    g()\n    reset_tracectx(tok)\n", "    try:\n        g()\n    finally:\n        reset_tracectx(tok)\n")


@pytest.mark.usefixtures("default_recursion_limit")
def test_a_libcst_recursion_error_leaves_the_finding_with_the_reason() -> None:
    source = BROKEN + "s = " + "+".join(["'a'"] * 400) + "\n"
    result = fix_source(source)
    assert result.source == source and result.fixed == 0
    assert [(u.line, u.code) for u in result.unfixed] == [(3, "STC001")]
    assert "libcst cannot rewrite this file (RecursionError)" in result.unfixed[0].reason


def test_a_failing_file_does_not_stop_the_others(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "a.py").write_text(BROKEN)
    (tmp_path / "b.py").write_text(BROKEN)
    real = fix_source

    def flaky(source: str, path: str = "<source>", **kwargs: frozenset[str]) -> object:
        if path.endswith("a.py"):
            raise RuntimeError("boom")
        return real(source, path, **kwargs)

    monkeypatch.setattr("safe_tracectx.lint.fix.fix_source", flaky)
    assert main(["--isolated", "--fix", str(tmp_path)]) == ExitStatus.FINDINGS
    err = capsys.readouterr().err
    assert "a.py: not fixed: internal error RuntimeError: boom" in err and "Traceback" not in err
    assert (tmp_path / "b.py").read_text() == FIXED


def test_an_unwritable_file_is_a_message_and_exit_2(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    """A read-only file (refused by the file system even for root, as the project's CI runs)."""
    real = Path.write_bytes

    def refuse(self: Path, data: bytes) -> int:
        if self.name == "a.py":
            raise PermissionError(13, "Permission denied", str(self))
        return real(self, data)

    monkeypatch.setattr(Path, "write_bytes", refuse)
    _read_only_case(tmp_path, capsys)


def _read_only_case(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "a.py").write_text(BROKEN)
    (tmp_path / "b.py").write_text(BROKEN)
    (tmp_path / "a.py").chmod(0o444)
    assert main(["--isolated", "--fix", str(tmp_path)]) == ExitStatus.USAGE_ERROR
    err = capsys.readouterr().err
    assert "cannot write" in err and "a.py" in err and "Traceback" not in err
    assert (tmp_path / "b.py").read_text() == FIXED
    assert (tmp_path / "a.py").read_text() == BROKEN


@pytest.mark.parametrize("option", ["--fix", "--diff"])
def test_a_syntax_error_is_stc901_and_exit_1(option: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "syn.py"
    path.write_text("def broken(:\n")
    assert main(["--isolated", option, str(path)]) == ExitStatus.FINDINGS
    captured = capsys.readouterr()
    assert "syn.py:1:12: STC901" in (captured.err if option == "--diff" else captured.out)  # a diff's output is the patch
    assert main(["--isolated", "--exit-zero", option, str(path)]) == ExitStatus.OK
    capsys.readouterr()
    monkeypatch.setattr("sys.stdin", io.TextIOWrapper(io.BytesIO(b"def broken(:\n")))
    assert main(["--isolated", option, "-"]) == ExitStatus.FINDINGS
    assert "-:1:12: STC901" in capsys.readouterr().err


def test_fix_of_standard_input_with_a_syntax_error(monkeypatch: pytest.MonkeyPatch, capsysbinary: pytest.CaptureFixture[bytes]) -> None:
    monkeypatch.setattr("sys.stdin", io.TextIOWrapper(io.BytesIO(b"def broken(:\n")))
    assert main(["--isolated", "--fix", "-"]) == ExitStatus.FINDINGS
    captured = capsysbinary.readouterr()
    assert captured.out == b"def broken(:\n" and b"-:1:12: STC901" in captured.err
    monkeypatch.setattr("sys.stdin", io.TextIOWrapper(io.BytesIO(b"def broken(:\n")))
    assert main(["--isolated", "--exit-zero", "--fix", "-"]) == ExitStatus.OK


def test_fix_of_a_file_and_standard_input_fixes_both(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsysbinary: pytest.CaptureFixture[bytes]) -> None:
    path = tmp_path / "u2.py"
    path.write_text(BROKEN)
    monkeypatch.setattr("sys.stdin", io.TextIOWrapper(io.BytesIO(BROKEN.encode())))
    assert main(["--isolated", "--fix", str(path), "-"]) == ExitStatus.OK
    assert path.read_text() == FIXED
    assert capsysbinary.readouterr().out == FIXED.encode()


def test_planning_is_linear_in_the_findings(monkeypatch: pytest.MonkeyPatch) -> None:
    """The nodes planning visits grow with the findings, not with their square (each finding once walked the tree)."""
    import ast

    from collections.abc import Iterator

    from safe_tracectx.lint import fixplan

    visited = [0]
    walk, children = ast.walk, ast.iter_child_nodes

    def counted_walk(node: ast.AST) -> Iterator[ast.AST]:
        for found in walk(node):
            visited[0] += 1
            yield found

    def counted_children(node: ast.AST) -> Iterator[ast.AST]:
        for found in children(node):
            visited[0] += 1
            yield found

    monkeypatch.setattr(ast, "walk", counted_walk)  # fixplan reads ast.walk at each call
    monkeypatch.setattr(ast, "iter_child_nodes", counted_children)

    def nodes_visited(n: int) -> int:
        source = "".join(f"def f{i}(t):\n    tok = set_tracectx(t)\n    g()\n    reset_tracectx(tok)\n" for i in range(n))
        visited[0] = 0
        edits, unfixed = fixplan.plan(ast.parse(source), [(2 + 4 * i, "STC001") for i in range(n)])
        assert len(edits) == n and not unfixed
        return visited[0]

    small, large = nodes_visited(250), nodes_visited(1000)
    assert large < 6 * small, f"4x the findings visited {large / small:.1f}x the nodes"


def test_fix_keeps_carriage_return_line_endings(tmp_path: Path) -> None:
    path = tmp_path / "cr.py"
    path.write_bytes(BROKEN.replace("\n", "\r").encode())
    assert main(["--isolated", "--fix", str(path)]) == ExitStatus.OK
    assert path.read_bytes() == FIXED.replace("\n", "\r").encode()
