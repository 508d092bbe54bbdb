"""The conventions of ruff and flake8: --exit-zero, excludes, per-file ignores, pyproject.toml,
--statistics, standard input, --explain, --list-proxy-sites and # noqa."""

from __future__ import annotations

import io
import json
import shlex
from pathlib import Path

import pytest
import yaml

from safe_tracectx.exitcodes import ExitStatus
from safe_tracectx.lint.command import main

ROOT = Path(__file__).resolve().parents[1]
BAD = "def f(t):\n    tok = set_tracectx(t)\n"


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A project folder (the current folder) with findings in src/, tests/ and excluded folders."""
    for name in ("src/a.py", "tests/test_a.py", "build/lib/a.py", ".venv/lib/a.py", "__pycache__/a.py", "gen/g.py"):
        path = tmp_path / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(BAD)
    monkeypatch.chdir(tmp_path)
    return tmp_path


def report(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, list[str], str]:
    """Exit status, the paths with findings (sorted, relative) and standard error of one run."""
    status = main(["--format", "json", *argv])
    captured = capsys.readouterr()
    document = json.loads(captured.out) if captured.out.strip().startswith("{") else {"findings": []}
    return status, sorted({Path(f["path"]).as_posix() for f in document["findings"]}), captured.err


def test_exit_zero_reports_but_exits_0(project: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--exit-zero", "src"]) == ExitStatus.OK
    assert "src/a.py:2:11: STC001" in capsys.readouterr().out
    assert main(["--exit-zero", "--select", ","]) == ExitStatus.USAGE_ERROR  # not for usage errors


def test_default_excludes_skip_build_venv_and_pycache(project: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert report(capsys, ".")[:2] == (1, ["gen/g.py", "src/a.py", "tests/test_a.py"])


def test_exclude_replaces_and_extend_exclude_adds(project: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert report(capsys, "--extend-exclude", "gen,tests/*", ".")[1] == ["src/a.py"]
    replaced = report(capsys, "--exclude", "gen", ".")[1]
    assert replaced == [".venv/lib/a.py", "__pycache__/a.py", "build/lib/a.py", "src/a.py", "tests/test_a.py"]
    assert report(capsys, "--exclude", ",", ".")[0] == ExitStatus.USAGE_ERROR


def test_a_file_named_on_the_command_line_is_checked_even_if_excluded(project: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert report(capsys, "--extend-exclude", "src", "src/a.py")[1] == ["src/a.py"]


def test_force_exclude_skips_named_paths_that_pyproject_excludes_as_ruff_does(
    project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (project / "pyproject.toml").write_text('[tool.safe-tracectx]\nextend-exclude = ["gen", "tests/*"]\n')
    named = ["src/a.py", "gen/g.py", "tests/test_a.py", "build/lib/a.py"]
    assert report(capsys, *named)[1] == sorted(named)  # without it, a named file is checked
    assert report(capsys, "--force-exclude", *named)[1] == ["src/a.py"]
    assert report(capsys, "--force-exclude", "--no-force-exclude", *named)[1] == sorted(named)
    assert report(capsys, "--force-exclude", "gen", "src")[1] == ["src/a.py"]  # a named folder too
    assert report(capsys, "--force-exclude", "gen/g.py", "tests/test_a.py")[:2] == (ExitStatus.OK, [])
    (project / "pyproject.toml").write_text('[tool.safe-tracectx]\nexclude = ["gen"]\n')  # replaces the defaults
    assert report(capsys, "--force-exclude", *named)[1] == ["build/lib/a.py", "src/a.py", "tests/test_a.py"]


def test_force_exclude_does_not_skip_a_file_outside_the_project_for_its_parents_names(
    project: Path, capsys: pytest.CaptureFixture[str], tmp_path_factory: pytest.TempPathFactory
) -> None:
    """Excludes are of the project: a named file elsewhere, under a `.cache` or `build` folder, is checked; one
    whose own name is excluded is not."""
    elsewhere = tmp_path_factory.mktemp("elsewhere") / ".cache" / "build"
    elsewhere.mkdir(parents=True)
    (elsewhere / "z.py").write_text(BAD)
    (elsewhere / "gen.py").write_text(BAD)
    (project / "pyproject.toml").write_text('[tool.safe-tracectx]\nextend-exclude = ["gen.py"]\n')
    named = str(elsewhere / "z.py")
    assert report(capsys, "--force-exclude", named, str(elsewhere / "gen.py"))[1] == [Path(named).as_posix()]


def test_the_pre_commit_hook_skips_the_files_pyproject_excludes(project: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """pre-commit names every staged file: the hook forces the excludes, so `lint .` and the hook agree."""
    (project / "pyproject.toml").write_text('[tool.safe-tracectx]\nextend-exclude = ["gen"]\n')
    (hook,) = yaml.safe_load((ROOT / ".pre-commit-hooks.yaml").read_text(encoding="utf-8"))
    program, subcommand, *args = shlex.split(hook["entry"])
    assert (program, subcommand) == ("safe-tracectx", "lint")
    staged = ["src/a.py", "gen/g.py", "build/lib/a.py", "tests/test_a.py"]
    assert report(capsys, *args, *staged)[1] == report(capsys, ".")[1] == ["src/a.py", "tests/test_a.py"]


def test_per_file_ignores(project: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert report(capsys, "--per-file-ignores", "tests/*:STC001 gen/*:STC0", ".")[1] == ["src/a.py"]
    assert report(capsys, "--per-file-ignores", "tests/*:STC002", ".")[1] == ["gen/g.py", "src/a.py", "tests/test_a.py"]
    status, _, err = report(capsys, "--per-file-ignores", "tests/*", ".")
    assert status == ExitStatus.USAGE_ERROR and "expected GLOB:CODES such as tests/*:STC001" in err


def write_config(folder: Path, body: str) -> None:
    (folder / "pyproject.toml").write_text(f'[project]\nname = "p"\n\n[tool.safe-tracectx]\n{body}\n')


def test_pyproject_is_found_from_a_subfolder_and_the_cli_overrides_it(
    project: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    write_config(project, 'extend-exclude = ["gen"]\nper-file-ignores = { "tests/*" = ["STC001"] }')
    assert report(capsys, ".")[1] == ["src/a.py"]
    monkeypatch.chdir(project / "tests")  # walking up finds ../pyproject.toml; globs stay relative to it
    assert report(capsys, ".")[:2] == (0, [])
    assert report(capsys, "--per-file-ignores", "src/*:STC001", ".")[1] == ["test_a.py"]
    assert report(capsys, "--isolated", ".")[1] == ["test_a.py"]


def test_an_empty_pyproject_exclude_replaces_the_defaults(project: Path, capsys: pytest.CaptureFixture[str]) -> None:
    write_config(project, "exclude = []")
    assert report(capsys, ".")[1] == [".venv/lib/a.py", "__pycache__/a.py", "build/lib/a.py", "gen/g.py", "src/a.py", "tests/test_a.py"]


def test_pyproject_select_and_ignore(project: Path, capsys: pytest.CaptureFixture[str]) -> None:
    write_config(project, 'ignore = ["STC001"]')
    assert report(capsys, "src")[:2] == (0, [])
    assert report(capsys, "--ignore", "STC002", "src")[1] == ["src/a.py"]
    write_config(project, 'select = ["STC002"]')
    assert report(capsys, "src")[:2] == (0, [])
    assert report(capsys, "--select", "STC001", "src")[1] == ["src/a.py"]


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ('select = "STC001"', 'select: expected a list of strings such as ["STC001"], got \'STC001\''),
        ('ignore = ["NOPE"]', "ignore: unknown rule code 'NOPE'"),
        ("select = []", "select '' names no rule code"),
        ("exclude = 3", "exclude: expected a list of strings such as [\"build\"], got 3"),
        ('per-file-ignores = ["tests/*"]', "per-file-ignores: expected a table such as"),
        ('per-file-ignores = { "tests/*" = "STC001" }', "per-file-ignores 'tests/*': expected a list of strings"),
        ('selct = ["STC001"]', "unknown key 'selct'; the keys are: select, ignore, exclude, extend-exclude, per-file-ignores"),
        ("select = [", "not valid TOML"),
    ],
)
def test_a_bad_pyproject_value_is_a_usage_error_naming_the_key(
    project: Path, capsys: pytest.CaptureFixture[str], body: str, message: str
) -> None:
    write_config(project, body)
    assert main(["src"]) == ExitStatus.USAGE_ERROR
    err = capsys.readouterr().err
    assert err.startswith("usage: safe-tracectx lint")
    assert "pyproject.toml" in err and message in err
    assert main(["--isolated", "src"]) == ExitStatus.FINDINGS  # --isolated does not read it


def test_statistics(project: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (project / "src" / "b.py").write_text("set_tracectx(t)\ndef f():\n    try:\n        tok = set_tracectx(t)\n    finally:\n        reset_tracectx(tok)\n")
    assert main(["--statistics", "src"]) == ExitStatus.FINDINGS
    lines = capsys.readouterr().out.splitlines()
    assert lines[-2:] == ["   2 STC001 unguarded-set-tracectx", "   1 STC002 set-tracectx-inside-try"]
    main(["--statistics", "--format", "json", "src"])
    assert json.loads(capsys.readouterr().out)["statistics"] == {"STC001": 2, "STC002": 1}
    assert main(["--statistics", "--format", "sarif", "src"]) == ExitStatus.USAGE_ERROR


def stdin(monkeypatch: pytest.MonkeyPatch, data: bytes) -> None:
    monkeypatch.setattr("sys.stdin", io.TextIOWrapper(io.BytesIO(data)))


def test_stdin_with_a_filename(project: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    stdin(monkeypatch, BAD.encode())
    assert main(["-", "--stdin-filename", "src/new.py"]) == ExitStatus.FINDINGS
    out = capsys.readouterr().out
    assert "src/new.py:2:11: STC001" in out and "1 finding(s) in 1 of 1 files" in out
    stdin(monkeypatch, BAD.encode())
    assert main(["--stdin-filename", "tests/t.py", "--per-file-ignores", "tests/*:STC001"]) == ExitStatus.OK
    stdin(monkeypatch, b"x = '\xff'\n")
    assert main(["-"]) == ExitStatus.FINDINGS
    assert "-:1:1: STC902 not valid utf-8" in capsys.readouterr().out
    assert main(["-", "-"]) == ExitStatus.USAGE_ERROR


def test_explain(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--explain", "stc001"]) == ExitStatus.OK
    text = capsys.readouterr().out
    assert text.startswith("STC001 unguarded-set-tracectx\n")
    for part in ("What: set_tracectx() whose reset_tracectx()", "Why: Thunder keeps the active trace", "Wrong:", "Right:", "Fix: use `with tracectx(trace):`"):
        assert part in text
    assert "\n        token = set_tracectx(trace)\n        try:\n" in text  # the right example, indented
    assert main(["--explain", "STC999"]) == ExitStatus.USAGE_ERROR
    assert "--explain: unknown rule code 'STC999'" in capsys.readouterr().err


GUARDED = "from thunder.core.trace import tracectx\n\ndef f(t, p):\n    with tracectx(t):\n        return p.replace_name('x')\n"


def test_list_proxy_sites_exits_0_when_every_call_is_guarded(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "guarded.py").write_text(GUARDED)
    assert main([str(tmp_path / "guarded.py")]) == ExitStatus.OK  # STC100 is off by default
    assert main(["--list-proxy-sites", str(tmp_path / "guarded.py")]) == ExitStatus.OK
    out = capsys.readouterr().out
    assert "STC100 proxy-creating call .replace_name(...): guarded by `with tracectx(...)` at line 4" in out
    assert "1 finding(s) in 1 of 1 files (1 informational: guarded proxy-creating calls)" in out
    (tmp_path / "unguarded.py").write_text("def g(like):\n    return TensorProxy(like=like)\n")
    assert main(["--list-proxy-sites", str(tmp_path)]) == ExitStatus.FINDINGS
    assert main(["--list-proxy-sites", "--select", "STC001", str(tmp_path)]) == ExitStatus.FINDINGS


def test_audit_flag_was_renamed(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--audit", str(tmp_path)]) == ExitStatus.USAGE_ERROR
    assert "--audit is now --list-proxy-sites" in capsys.readouterr().err


def test_noqa_specific_and_bare(tmp_path: Path) -> None:
    (tmp_path / "a.py").write_text("set_tracectx(t)  # noqa: STC001\nset_tracectx(t)  # noqa\n")
    assert main([str(tmp_path)]) == ExitStatus.OK
    (tmp_path / "b.py").write_text("set_tracectx(t)  # noqa: STC002\n")
    assert main([str(tmp_path)]) == ExitStatus.FINDINGS


def test_help_is_exit_0(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--help"]) == ExitStatus.OK
    out = capsys.readouterr().out
    assert out.startswith("usage: safe-tracectx lint") and "--list-proxy-sites" in out and "--audit" not in out
