"""safe-tracectx run and report behave like `coverage run` and `python -m`: arguments, paths, statuses, errors."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from safe_tracectx.cli import main
from safe_tracectx.exitcodes import ExitStatus

PROGRAM = """
import sys, warnings
warnings.simplefilter("ignore")
from thunder.core.trace import TraceCtx, set_tracectx
print("argv", sys.argv[1:])
mode = sys.argv[1] if len(sys.argv) > 1 else ""
if mode == "leak":
    set_tracectx(TraceCtx())  # never reset
if mode == "interrupt":
    raise KeyboardInterrupt
if mode == "traceless":
    from thunder.core.proxies import TensorProxy
    from thunder.core.devices import cpu
    from thunder.core.dtypes import float32
    TensorProxy(shape=(1,), device=cpu, dtype=float32)
"""


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    package = tmp_path / "pkg"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "train.py").write_text(PROGRAM)
    (tmp_path / "prog.py").write_text(PROGRAM)
    monkeypatch.chdir(tmp_path)
    return tmp_path


def test_run_m_finds_the_module_in_the_current_folder_and_passes_its_arguments(
    project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["run", "--top", "0", "-m", "pkg.train", "--lr", "0.1", "--top", "3"]) == 0
    out = capsys.readouterr().out
    assert "argv ['--lr', '0.1', '--top', '3']" in out  # everything after the module is the program's
    assert "proxy-creating call sites" not in out  # --top 0: no call-site table


def test_script_arguments_that_look_like_run_options_belong_to_the_script(
    project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["run", "prog.py", "--json", "x", "--fail-on-violation"]) == 0
    assert "argv ['--json', 'x', '--fail-on-violation']" in capsys.readouterr().out
    assert not (project / "x").exists()


def test_an_unwritable_json_path_is_a_usage_error_before_the_program_runs(
    project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["run", "--json", "/nonexistent/x.json", "prog.py"]) == ExitStatus.USAGE_ERROR
    captured = capsys.readouterr()
    assert "argv" not in captured.out  # the program never ran
    assert "--json: cannot write /nonexistent/x.json: the folder /nonexistent does not exist" in captured.err
    assert "usage: safe-tracectx run" in captured.err


def test_fail_on_violation_counts_a_set_never_reset(project: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["run", "--fail-on-violation", "prog.py", "leak"]) == ExitStatus.FINDINGS
    out = capsys.readouterr().out
    assert "Violations (1)" in out and "never reset" in out
    assert "prog.py:8" in out  # the set's line, relative to the current folder


def test_ctrl_c_exits_130(project: Path) -> None:
    assert main(["run", "prog.py", "interrupt"]) == 130


def test_lenient_traceless_proxies_are_counted(project: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["run", "--policy", "lenient", "prog.py", "traceless"]) == 0
    out = capsys.readouterr().out
    assert "Proxies made traceless because no trace was active (lenient policy): 1" in out
    assert "prog.py:" in out


def test_report_paths_are_relative_inside_the_current_folder_and_labels_are_stable(
    project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["run", "--json", "audit.json", "prog.py", "leak"]) == 0
    document = json.loads((project / "audit.json").read_text())
    (leak,) = document["leaked_sets"]
    assert leak["site"]["file"] == "prog.py" and leak["site"]["line"] == 8
    assert "bound symbols" not in leak["trace"]  # no counts that change with every event
    assert not os.path.isabs(leak["site"]["file"])


def test_report_renders_a_saved_run_and_refuses_what_is_not_one(
    project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["run", "--json", "audit.json", "prog.py", "leak"]) == 0
    live = capsys.readouterr().out
    assert main(["report", "audit.json"]) == 0
    again = capsys.readouterr().out
    assert again.strip() in live  # the same report, from the file
    assert main(["report", "--json", "audit.json"]) == 0
    assert json.loads(capsys.readouterr().out)["schema"] == "safe-tracectx/audit"
    (project / "other.json").write_text('{"schema": "something/else"}')
    assert main(["report", "other.json"]) == ExitStatus.USAGE_ERROR
    assert "is not a safe-tracectx data file" in capsys.readouterr().err
    (project / "broken.json").write_text("{not json")
    assert main(["report", "broken.json"]) == ExitStatus.USAGE_ERROR
    assert "cannot read broken.json" in capsys.readouterr().err


def test_usage_errors_print_the_subcommands_usage(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["report"]) == ExitStatus.USAGE_ERROR
    assert "usage: safe-tracectx report" in capsys.readouterr().err
    assert main(["lint", "--select", ","]) == ExitStatus.USAGE_ERROR
    assert "usage: safe-tracectx lint" in capsys.readouterr().err
    assert main(["nonsense"]) == ExitStatus.USAGE_ERROR


def test_python_dash_m_runs_the_same_command(project: Path) -> None:
    run = subprocess.run(
        [sys.executable, "-m", "safe_tracectx", "run", "-m", "pkg.train", "hello"],
        capture_output=True, text=True, timeout=300, cwd=project,
    )
    assert run.returncode == 0 and "argv ['hello']" in run.stdout, run.stderr[-2000:]


# ---- run's report path when the program changes folder, unknown options, unwritable folders ---------

import contextlib  # noqa: E402


def test_run_writes_its_report_where_it_started_when_the_program_changes_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "prog.py").write_text("import os\nos.chdir('/')\n")
    monkeypatch.chdir(tmp_path)
    assert main(["run", "--json", "out.json", "prog.py"]) == 0
    assert (tmp_path / "out.json").exists() and os.getcwd() == str(tmp_path)


def test_run_prints_its_own_usage_when_given_an_unknown_option(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["run", "--bogus", "x.py"]) == 2
    assert "usage: safe-tracectx run" in capsys.readouterr().err


def test_run_refuses_a_json_path_in_a_folder_it_cannot_write_before_running(capsys: pytest.CaptureFixture[str]) -> None:
    with contextlib.suppress(FileNotFoundError):
        assert main(["run", "--json", "/proc/x.json", "x.py"]) == 2
        assert "cannot write /proc/x.json" in capsys.readouterr().err


def test_an_option_added_to_runs_parser_is_never_taken_for_the_script() -> None:
    """Which options take a value is read from the parser: a new one needs no second list kept by hand."""
    from safe_tracectx.cli import build_parser
    from safe_tracectx.cli.program import split_program

    _, subs = build_parser()
    run = subs["run"]
    run.add_argument("--that-option", metavar="X")
    argv = ["run", "--that-option", "X", "--top", "3", "prog.py", "--that-option", "Y"]
    assert split_program(argv, run) == (["run", "--that-option", "X", "--top", "3"], ["prog.py", "--that-option", "Y"])
    args = run.parse_args(split_program(argv, run)[0][1:])
    assert (args.that_option, args.top) == ("X", 3)
    assert split_program(["run", "--that-option=X", "-mpkg.train", "--lr"], run) == (
        ["run", "--that-option=X", "-mpkg.train"], ["--lr"]
    )


@pytest.mark.parametrize("command", ["run", "sweep"])
def test_every_option_taking_a_value_keeps_its_value_before_the_script(command: str) -> None:
    from safe_tracectx.cli import build_parser
    from safe_tracectx.cli.program import options_taking_a_value, split_program

    _, subs = build_parser()
    flags = options_taking_a_value(subs[command]) - {"-m"}
    assert {"--json", "--top"} <= flags and "--fail-on-violation" not in flags
    for flag in sorted(flags):
        assert split_program([command, flag, "X", "prog.py", "a"], subs[command])[1] == ["prog.py", "a"], flag


def test_run_and_sweep_find_their_program_the_same_way(project: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """One resolver: the same usage errors, and -m of a missing module is one for sweep too."""
    for command in ("run", "sweep"):
        assert main([command, "missing_script.py"]) == ExitStatus.USAGE_ERROR
        assert capsys.readouterr().err.splitlines()[-1] == f"safe-tracectx {command}: error: no such script: missing_script.py"
        (project / "apppkg").mkdir(exist_ok=True)
        (project / "apppkg" / "__main__.py").write_text("print('hi')\n")
        assert main([command, str(project / "apppkg")]) == ExitStatus.USAGE_ERROR
        assert capsys.readouterr().err.splitlines()[-1].endswith(
            f"apppkg is a directory, not a script: give its {project / 'apppkg' / '__main__.py'}, or run a package with -m PACKAGE")
        assert main([command]) == ExitStatus.USAGE_ERROR
        assert f"{command} needs a script (safe-tracectx {command} script.py [args]) or -m MODULE" in capsys.readouterr().err
    assert main(["sweep", "-m", "missing.module"]) == ExitStatus.USAGE_ERROR
    err = capsys.readouterr().err.splitlines()
    assert err[-2:] == [
        "usage: safe-tracectx sweep [options] (script.py | -m MODULE) [program arguments ...]",
        "safe-tracectx sweep: error: no such module: missing.module",
    ]


def test_each_exit_status_is_a_member_of_its_own() -> None:
    """No alias: a status listed, compared or printed by name is the one the command means."""
    assert len(ExitStatus.__members__) == len(ExitStatus) == len({int(status) for status in ExitStatus})
    assert [status.name for status in ExitStatus] == ["OK", "FINDINGS", "USAGE_ERROR", "INTERRUPTED"]


def test_every_usage_error_takes_one_path(capsys: pytest.CaptureFixture[str]) -> None:
    """argparse's own errors, the commands' checks and lint's bad values: the usage, then `PROG: error: ...`."""
    from safe_tracectx.lint.command import main as lint_main

    cases = [
        (["lint", "--format", "xml"], "safe-tracectx lint: error: argument --format: invalid choice: 'xml'"),
        (["lint", "--select", ","], "safe-tracectx lint: error: "),
        (["report", "--top", "x"], "safe-tracectx report: error: argument --top: invalid int value: 'x'"),
        (["run", "--top", "-1", "x.py"], "safe-tracectx run: error: --top must be >= 0"),
        (["combine", "--nope"], "safe-tracectx combine: error: unrecognized arguments: --nope"),
    ]
    for argv, error in cases:
        assert main(argv) == ExitStatus.USAGE_ERROR
        lines = capsys.readouterr().err.splitlines()
        assert lines[0].startswith(f"usage: safe-tracectx {argv[0]}") and lines[-1].startswith(error), lines
    assert lint_main(["--format", "xml"]) == ExitStatus.USAGE_ERROR
    lines = capsys.readouterr().err.splitlines()
    assert lines[0].startswith("usage: safe-tracectx lint") and lines[-1].startswith(cases[0][1])


@pytest.mark.parametrize("old", ["VIOLATIONS", "SWEEP_FINDINGS"])
def test_an_exit_status_alias_of_before_is_findings_with_a_deprecation_warning(old: str) -> None:
    with pytest.warns(DeprecationWarning, match=rf"ExitStatus\.{old} is ExitStatus\.FINDINGS"):
        status = getattr(ExitStatus, old)
    assert status is ExitStatus.FINDINGS and old not in ExitStatus.__members__
    with pytest.raises(AttributeError, match="'ExitStatus' has no attribute 'NOPE'"):
        ExitStatus.NOPE  # noqa: B018
