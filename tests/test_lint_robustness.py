"""One bad file never aborts or hangs a lint run: it is a finding (STC901/902/903) or a skip with a message."""

from __future__ import annotations

import ast
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from safe_tracectx.exitcodes import ExitStatus
from safe_tracectx.lint import Finding, lint_paths
from safe_tracectx.lint.command import main

BAD = "def f(t):\n    tok = set_tracectx(t)\n"


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    """A folder with one clean file and one with an STC001 finding, to show the rest is still checked."""
    (tmp_path / "clean.py").write_text("x = 1\n")
    (tmp_path / "bad.py").write_text(BAD)
    return tmp_path


def found(path: Path) -> set[tuple[str, str]]:
    return {(Path(f.path).name, f.finding.code) for f in lint_paths([str(path)]).findings}


def test_broken_symlink_is_skipped_with_a_message(folder: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (folder / "x.py").symlink_to(folder / "gone.py")
    result = lint_paths([str(folder)])
    assert [(Path(s.path).name, s.reason) for s in result.skipped] == [("x.py", "a broken symbolic link; skipped")]
    assert result.files_checked == 2
    assert main([str(folder)]) == ExitStatus.FINDINGS
    assert "x.py: a broken symbolic link; skipped" in capsys.readouterr().err


def test_fifo_is_skipped_and_does_not_hang(folder: Path) -> None:
    os.mkfifo(folder / "pipe.py")
    code = "import sys; from safe_tracectx.lint.command import main; sys.exit(main(sys.argv[1:]))"
    for target in (folder, folder / "pipe.py"):  # found by walking, and named on the command line
        run = subprocess.run([sys.executable, "-c", code, str(target)], capture_output=True, text=True, timeout=120)
        assert "pipe.py: a FIFO (named pipe); only regular files are read, skipped" in run.stderr
        assert run.returncode == (ExitStatus.FINDINGS if target == folder else ExitStatus.OK), run.stderr


@pytest.mark.usefixtures("default_recursion_limit")
def test_long_concatenation_is_stc903_and_the_rest_is_checked(folder: Path) -> None:
    (folder / "long.py").write_text("s = " + " + ".join(['"a"'] * 5000) + "\n")
    assert found(folder) == {("bad.py", "STC001"), ("long.py", "STC903")}
    (finding,) = lint_paths([str(folder / "long.py")]).findings
    assert "nested too deeply for Python's parser (RecursionError)" in finding.finding.message


def test_hundred_thousand_nots_is_stc903(folder: Path) -> None:
    (folder / "nots.py").write_text("x = " + "not " * 100_000 + "a\n")
    assert found(folder) == {("bad.py", "STC001"), ("nots.py", "STC903")}
    assert main([str(folder / "nots.py")]) == ExitStatus.FINDINGS


def test_undefined_codec_and_invalid_utf8_are_stc902(folder: Path) -> None:
    (folder / "undefined.py").write_text("# -*- coding: undefined -*-\nx = 1\n")
    (folder / "unknown.py").write_text("# -*- coding: no-such-codec -*-\nx = 1\n")
    (folder / "invalid.py").write_bytes(b"x = '\xc3\x28'\n")
    assert found(folder) == {("bad.py", "STC001"), ("undefined.py", "STC902"), ("unknown.py", "STC902"), ("invalid.py", "STC902")}
    messages = {Path(f.path).name: f.finding.message for f in lint_paths([str(folder)]).findings}
    assert "unknown encoding" in messages["unknown.py"]
    assert messages["invalid.py"] == "not valid utf-8: byte 0xc3 at line 1 (invalid continuation byte); it was not checked"
    assert "undefined" in messages["undefined.py"]


def test_a_directory_named_like_a_module_is_walked(folder: Path) -> None:
    (folder / "x.py").mkdir()
    (folder / "x.py" / "inner.py").write_text(BAD)
    assert found(folder) == {("bad.py", "STC001"), ("inner.py", "STC001")}
    assert main([str(folder / "x.py")]) == ExitStatus.FINDINGS


def test_unreadable_file_is_stc903(folder: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    original = Path.read_bytes

    def read_bytes(self: Path) -> bytes:
        if self.name == "bad.py":
            raise PermissionError(13, "Permission denied")
        return original(self)

    monkeypatch.setattr(Path, "read_bytes", read_bytes)
    (finding,) = lint_paths([str(folder)]).findings
    assert (Path(finding.path).name, finding.finding.code) == ("bad.py", "STC903")
    assert "cannot read the file (Permission denied)" in finding.finding.message


def test_a_checker_error_is_stc903_for_that_file_only(folder: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import safe_tracectx.lint.runner as runner
    from safe_tracectx.lint.checker import check_tree as real

    def flaky(tree: ast.Module, *, audit: bool = False) -> list[Finding]:
        if any(isinstance(stmt, ast.FunctionDef) and stmt.name == "boom" for stmt in tree.body):
            raise ValueError("boom")
        return real(tree, audit=audit)

    monkeypatch.setattr(runner, "check_tree", flaky)
    (folder / "crash.py").write_text("def boom():\n    set_tracectx(t)\n")
    messages = {(Path(f.path).name, f.finding.code): f.finding.message for f in lint_paths([str(folder)]).findings}
    assert set(messages) == {("bad.py", "STC001"), ("crash.py", "STC903")}
    assert "internal error ValueError: boom" in messages[("crash.py", "STC903")]


def test_interrupt_is_exit_130(folder: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    import safe_tracectx.lint.command as command

    def interrupted(*args: object, **kwargs: object) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(command, "lint_paths", interrupted)
    assert main([str(folder)]) == 130
    assert "interrupted" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--select", ","], "--select ',' names no rule code"),
        (["--select", " "], "--select ' ' names no rule code"),
        (["--ignore", ","], "--ignore ',' names no rule code"),
        (["--select", "STC001,NOPE"], "--select: unknown rule code 'NOPE'; the codes are: STC001, STC002"),
        (["--ignore", "X1"], "--ignore: unknown rule code 'X1'"),
        (["--no-such-option"], "unrecognized arguments: --no-such-option"),
    ],
)
def test_bad_selections_are_usage_errors(
    folder: Path, argv: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main([*argv, str(folder)]) == ExitStatus.USAGE_ERROR
    err = capsys.readouterr().err
    assert err.startswith("usage: safe-tracectx lint")
    assert message in err


def test_exit_statuses_as_documented(folder: Path) -> None:
    assert main([str(folder / "clean.py")]) == 0
    assert main([str(folder)]) == 1
    assert main([str(folder / "missing.py")]) == 2


def test_python_warnings_about_the_file_do_not_stop_the_check(folder: Path) -> None:
    """`1()` and `"\\d"` make the parser warn; under -W error that would be a SyntaxError and "not checked"."""
    source = 'from thunder.core.trace import set_tracectx\nx = 1() if False else "\\d"\ntok = set_tracectx(t)\n'
    (folder / "odd.py").write_text(source)
    command = [sys.executable, "-W", "error", "-m", "safe_tracectx", "lint", str(folder / "odd.py")]
    out = subprocess.run(command, capture_output=True, text=True, timeout=120)
    assert "STC901" not in out.stdout and "SyntaxWarning" not in out.stderr, out.stdout + out.stderr
    assert "odd.py:3" in out.stdout and "STC001" in out.stdout, out.stdout


def test_parsing_in_two_threads_leaves_the_warning_filters_as_they_were(monkeypatch: pytest.MonkeyPatch) -> None:
    """Each parse swaps the process-wide filters; interleaved, the later exit would restore the other's "ignore"."""
    import threading
    import warnings

    from safe_tracectx.lint import runner

    real_parse = ast.parse
    a_in, b_in, a_done = threading.Event(), threading.Event(), threading.Event()

    def parse(source: str, *args: Any, **kwargs: Any) -> ast.Module:
        if source == "a = 1":  # A: waits (a little) for B to be inside its parse too
            a_in.set()
            b_in.wait(timeout=0.5)
        else:  # B: still inside when A leaves, if they overlap
            b_in.set()
            a_done.wait(timeout=0.5)
        tree: ast.Module = real_parse(source, *args, **kwargs)
        return tree

    def first() -> None:
        runner.parse_source("a = 1")
        a_done.set()

    with warnings.catch_warnings():  # put back for the next tests, whatever happens here
        before = list(warnings.filters)
        monkeypatch.setattr(ast, "parse", parse)  # the module runner parses with
        a = threading.Thread(target=first)
        b = threading.Thread(target=runner.parse_source, args=("b = 1",))
        a.start()
        assert a_in.wait(timeout=5)
        b.start()
        a.join()
        b.join()
        monkeypatch.undo()
        assert warnings.filters == before
