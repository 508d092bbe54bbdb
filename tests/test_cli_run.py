"""safe-tracectx run and demo: exit statuses, the report, --json, -m."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from safe_tracectx.cli import main

PROGRAM = """
import sys
import warnings
warnings.simplefilter("ignore")
import torch, thunder
from thunder.core.trace import TraceCtx, set_tracectx

def f(x):
    return torch.sin(x) * 2

print("result", thunder.jit(f)(torch.ones(2)).tolist(), "argv", sys.argv[1:])
mode = sys.argv[1] if len(sys.argv) > 1 else ""
if mode == "leak":
    set_tracectx(TraceCtx())  # never reset
if mode == "raise":
    raise ValueError("the program failed")
if mode == "exit":
    sys.exit(7)
if mode == "missing":
    from thunder.core.proxies import TensorProxy
    from thunder.core.devices import cpu
    from thunder.core.dtypes import float32
    TensorProxy(shape=(1,), device=cpu, dtype=float32)
"""


@pytest.fixture
def program(tmp_path: Path) -> Path:
    path = tmp_path / "program.py"
    path.write_text(textwrap.dedent(PROGRAM))
    return path


def test_run_prints_the_program_output_and_the_report(program: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["run", str(program), "ok", "--flag"]) == 0
    out = capsys.readouterr().out
    assert "result [1.68" in out and "argv ['ok', '--flag']" in out
    for section in ("safe-tracectx audit report", "Remat passes", "Proxy creations by pass", "Trace set/reset balance", "Violations (0)"):
        assert section in out
    assert "never reset 0" in out


def test_a_leaked_set_is_listed_with_its_line(program: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["run", str(program), "leak"]) == 0
    out = capsys.readouterr().out
    line = textwrap.dedent(PROGRAM).splitlines().index("    set_tracectx(TraceCtx())  # never reset") + 1
    assert f"never reset: set_tracectx(trace" in out and f"program.py:{line} in <module>" in out
    # found when the program had ended: nothing raised into it (it exited 0), so the report does not say "raise"
    assert "[UnbalancedContextError, reported at the end] 1 set_tracectx() made under safe-tracectx run" in out
    assert ", raise]" not in out


def test_a_program_that_raises_exits_1_with_its_traceback_and_the_report(
    program: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["run", str(program), "raise"]) == 1
    captured = capsys.readouterr()
    assert "ValueError: the program failed" in captured.err
    assert "safe-tracectx audit report" in captured.out


def test_sys_exit_status_is_kept(program: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["run", str(program), "exit"]) == 7
    assert "safe-tracectx audit report" in capsys.readouterr().out


def test_violations_and_fail_on_violation(program: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # strict: the proxy made with no trace raises MissingTraceError inside the program
    assert main(["run", str(program), "missing"]) == 1
    captured = capsys.readouterr()
    assert "MissingTraceError: creating a TensorProxy needs an active trace" in captured.err
    assert "Violations (1)" in captured.out and "[MissingTraceError, raise]" in captured.out
    # lenient: the program succeeds (traceless proxy); --fail-on-violation still fails only on violations
    assert main(["run", "--policy", "lenient", "--fail-on-violation", str(program), "missing"]) == 0
    assert main(["run", "--fail-on-violation", str(program), "missing"]) == 1


def test_json_log_has_the_documented_schema(program: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out_file = tmp_path / "audit.json"
    assert main(["run", "--json", str(out_file), str(program)]) == 0
    document = json.loads(out_file.read_text())
    assert document["schema"] == "safe-tracectx/audit" and document["version"] == 2
    assert document["counts"]["proxy_created"] > 0 and document["violations"] == []
    assert {"kind", "site", "thread", "trace_id", "trace", "pass", "detail"} == set(document["events"][0])
    assert f"audit log written to {out_file}" in capsys.readouterr().out


def test_run_a_module_with_dash_m(program: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.syspath_prepend(str(program.parent))
    assert main(["run", "-m", "program", "exit"]) == 7
    out = capsys.readouterr().out
    assert "argv ['exit']" in out and "safe-tracectx audit report" in out


def test_usage_errors(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["run", str(tmp_path / "nope.py")]) == 2
    assert "no such script" in capsys.readouterr().err
    assert main(["run"]) == 2  # a status, not a SystemExit from deep inside
    assert "safe-tracectx run" in capsys.readouterr().err  # the subcommand's usage
    assert main(["run", "--top", "-1", "x.py"]) == 2


def test_demo_runs_and_its_report_names_the_remat_passes() -> None:
    """The main job, exactly as the README's first command runs it."""
    run = subprocess.run(
        [sys.executable, "-m", "safe_tracectx", "demo", "--top", "5"], capture_output=True, text=True, timeout=300
    )
    out = run.stdout
    assert run.returncode == 0, run.stderr[-2000:]
    assert "forward done" in out and "backward done" in out
    for expected in ("fusion remat", "autodiff grad transform", "backward recompute", "InsertRecomputationsProcessor", "Violations (0)"):
        assert expected in out, expected
    assert "never reset 0" in out


# ---- a program that installs safe_tracectx itself under run -----------------------------------------

from safe_tracectx.hooks import is_installed  # noqa: E402


def test_run_keeps_its_report_and_the_programs_status_when_the_program_installs_and_uninstalls(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    program = tmp_path / "program.py"
    program.write_text(
        "import sys, safe_tracectx as stc\n"
        "stc.install('strict', audit=True)\n"
        "stc.uninstall()\n"
        "sys.exit(3)\n"
    )
    assert main(["run", str(program)]) == 3
    out = capsys.readouterr().out
    assert "safe-tracectx audit report" in out and "Violations (0)" in out


def test_run_ends_and_reports_an_installation_the_program_left_running(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    program = tmp_path / "program.py"
    program.write_text("import safe_tracectx as stc\nstc.install('lenient')\n")
    assert main(["run", "--fail-on-violation", str(program)]) == 1
    out = capsys.readouterr().out
    assert "was still running when" in out and not is_installed()
