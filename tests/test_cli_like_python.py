"""``safe-tracectx run`` behaves like ``python`` (issue 24, part 3), checked against ``python`` itself.

Each test runs the real command in a fresh process on a tiny program that does not import Thunder:
the traceback, a SyntaxError, ``-m`` of a missing module, ``sys.argv``, ``SAFE_TRACECTX_POLICY``,
a standard output closed by its reader (``| head``), and ``--json -``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

COMMAND = [sys.executable, "-m", "safe_tracectx"]
TIMEOUT = 300

FAILING = """
import sys
print("argv", sys.argv, flush=True)

def inner():
    try:
        {}["key"]
    except KeyError:
        raise ValueError("the program failed")

def outer():
    inner()

outer()
"""


def environment(**changes: str | None) -> dict[str, str]:
    """This environment, without a launch or a policy of its own, and with ``changes`` (None: unset)."""
    env = {k: v for k, v in os.environ.items() if k not in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "SAFE_TRACECTX_POLICY")}
    for name, value in changes.items():
        if value is None:
            env.pop(name, None)
        else:
            env[name] = value
    return env


def run(args: list[str], cwd: Path, **env: str | None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(args, cwd=cwd, env=environment(**env), capture_output=True, text=True, timeout=TIMEOUT)


def write(folder: Path, name: str, text: str) -> str:
    (folder / name).write_text(textwrap.dedent(text))
    return name


def block(stderr: str, first: str, last_prefix: str) -> list[str]:
    """The lines of ``stderr`` from the line ``first`` to the first line starting with ``last_prefix``."""
    lines = stderr.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith(first))
    end = next(i for i in range(start, len(lines)) if lines[i].startswith(last_prefix))
    return lines[start : end + 1]


def test_a_failing_script_prints_pythons_traceback_and_argv_as_typed_then_the_report(tmp_path: Path) -> None:
    script = write(tmp_path, "bad.py", FAILING)
    python = run([sys.executable, script, "a", "b"], tmp_path)
    ours = run([*COMMAND, "run", script, "a", "b"], tmp_path)
    assert python.returncode == ours.returncode == 1, ours.stderr[-3000:]
    assert ours.stdout.splitlines()[0] == python.stdout.splitlines()[0] == "argv ['bad.py', 'a', 'b']"
    expected = python.stderr.splitlines()
    assert expected[0] == "Traceback (most recent call last):" and expected[-1] == "ValueError: the program failed"
    assert block(ours.stderr, "Traceback (most recent call last):", "ValueError") == expected
    assert "cli/run.py" not in ours.stderr and "runpy" not in ours.stderr
    assert "safe-tracectx audit report" in ours.stdout  # the report still follows


def test_a_syntax_error_is_printed_as_python_does_without_a_traceback(tmp_path: Path) -> None:
    script = write(tmp_path, "syntax.py", "x = 1\nprint((x,)\n")
    python = run([sys.executable, script], tmp_path)
    ours = run([*COMMAND, "run", script], tmp_path)
    assert python.returncode == ours.returncode == 1, ours.stderr[-3000:]
    expected = python.stderr.splitlines()
    assert expected[0].startswith('  File "') and expected[-1].startswith("SyntaxError: ")
    assert block(ours.stderr, '  File "', "SyntaxError: ") == expected
    assert "Traceback" not in ours.stderr and "runpy" not in ours.stderr
    assert "safe-tracectx audit report" in ours.stdout


def test_dash_m_argv_and_traceback_as_python_dash_m_without_runpy(tmp_path: Path) -> None:
    write(tmp_path, "failing_module.py", FAILING)
    python = run([sys.executable, "-m", "failing_module", "a"], tmp_path)
    ours = run([*COMMAND, "run", "-m", "failing_module", "a"], tmp_path)
    assert python.returncode == ours.returncode == 1, ours.stderr[-3000:]
    argv = f"argv [{str(tmp_path / 'failing_module.py')!r}, 'a']"  # python -m: the module's full path
    assert ours.stdout.splitlines()[0] == python.stdout.splitlines()[0] == argv
    expected = [line for line in python.stderr.splitlines() if '"<frozen runpy>"' not in line]
    assert block(ours.stderr, "Traceback (most recent call last):", "ValueError") == expected
    assert "runpy" not in ours.stderr and "cli/run.py" not in ours.stderr


def test_dash_m_of_a_missing_module_is_a_one_line_usage_error_like_a_missing_script(tmp_path: Path) -> None:
    script = run([*COMMAND, "run", "missing_script.py"], tmp_path)
    module = run([*COMMAND, "run", "-m", "missing.module", "--flag"], tmp_path)
    assert script.returncode == module.returncode == 2
    assert script.stderr.splitlines()[-1] == "safe-tracectx run: error: no such script: missing_script.py"
    assert module.stderr.splitlines()[-2:] == [
        script.stderr.splitlines()[-2],  # the same usage line
        "safe-tracectx run: error: no such module: missing.module",
    ]
    assert "Traceback" not in module.stderr and "audit report" not in module.stdout


def test_dash_m_of_a_module_whose_own_import_fails_is_the_programs_error(tmp_path: Path) -> None:
    write(tmp_path, "needs_more.py", "import a_module_nobody_installed\n")
    python = run([sys.executable, "-m", "needs_more"], tmp_path)
    ours = run([*COMMAND, "run", "-m", "needs_more"], tmp_path)
    assert python.returncode == ours.returncode == 1, ours.stderr[-3000:]
    assert ours.stderr.splitlines()[-1] == python.stderr.splitlines()[-1]
    assert ours.stderr.splitlines()[-1] == "ModuleNotFoundError: No module named 'a_module_nobody_installed'"
    assert "safe-tracectx audit report" in ours.stdout


POLICY = """
from safe_tracectx.policy import AUDIT, LENIENT, STRICT, get_policy
names = [("audit", AUDIT), ("lenient", LENIENT), ("strict", STRICT)]
print("policy", next((name for name, policy in names if policy == get_policy()), "other"))
"""


def test_the_policy_variable_is_honoured_unless_policy_is_given_and_a_typo_refused(tmp_path: Path) -> None:
    script = write(tmp_path, "policy.py", POLICY)
    assert "policy lenient" in run([*COMMAND, "run", script], tmp_path, SAFE_TRACECTX_POLICY="lenient").stdout
    given = run([*COMMAND, "run", "--policy", "audit", script], tmp_path, SAFE_TRACECTX_POLICY="lenient")
    assert "policy audit" in given.stdout, given.stderr[-3000:]
    typo = run([*COMMAND, "run", script], tmp_path, SAFE_TRACECTX_POLICY="strcit")
    assert typo.returncode == 2 and "policy" not in typo.stdout  # refused before the program runs
    assert typo.stderr.splitlines()[-1] == (
        "safe-tracectx run: error: the environment variable SAFE_TRACECTX_POLICY='strcit' is not a policy preset; "
        "use one of: strict, lenient, audit"
    )


def run_with_stdout_closed(args: list[str], cwd: Path, **env: str | None) -> subprocess.CompletedProcess[str]:
    """``args | head -0``, without the race: the reading end is closed before the process starts."""
    read, write_end = os.pipe()
    os.close(read)
    try:
        return subprocess.run(
            args, cwd=cwd, env=environment(**env), stdout=write_end, stderr=subprocess.PIPE, text=True, timeout=TIMEOUT
        )
    finally:
        os.close(write_end)


def test_a_closed_standard_output_loses_nothing(tmp_path: Path) -> None:
    # the program's own print is buffered (PYTHONUNBUFFERED unset), as in `python prog.py | head`: it fails
    # only when the report is written, and neither the status nor a file is lost
    script = write(tmp_path, "exits.py", 'print("the program ran")\nraise SystemExit(3)\n')
    ran = run_with_stdout_closed(
        [*COMMAND, "run", "--json", "audit.json", "--html", "html", script], tmp_path, PYTHONUNBUFFERED=None
    )
    assert ran.returncode == 3, ran.stderr[-3000:]
    assert json.loads((tmp_path / "audit.json").read_text())["schema"] == "safe-tracectx/audit"
    assert (tmp_path / "html" / "index.html").is_file()
    for unwanted in ("BrokenPipeError", "Traceback", "Exception ignored"):
        assert unwanted not in ran.stderr


@pytest.mark.parametrize("unbuffered", [None, "1"], ids=["buffered", "unbuffered"])
def test_report_to_a_closed_standard_output_loses_nothing(tmp_path: Path, unbuffered: str | None) -> None:
    """`report FILE | head`, whether the report's print fails at once (unbuffered) or only at the end."""
    from safe_tracectx.auditlog.log import AuditLog

    (tmp_path / "audit.json").write_text(json.dumps(AuditLog().to_dict()))
    report = run_with_stdout_closed(
        [*COMMAND, "report", "audit.json", "--html", "html"], tmp_path, PYTHONUNBUFFERED=unbuffered
    )
    assert report.returncode == 0, report.stderr
    assert (tmp_path / "html" / "index.html").is_file()
    for unwanted in ("BrokenPipeError", "Traceback", "Exception ignored"):
        assert unwanted not in report.stderr


def test_json_dash_writes_the_document_to_standard_output_and_nothing_else(tmp_path: Path) -> None:
    script = write(tmp_path, "quiet.py", 'import sys\nprint("to stderr", file=sys.stderr)\n')
    ran = run([*COMMAND, "run", "--json", "-", "--html", "html", script], tmp_path)
    assert ran.returncode == 0, ran.stderr[-3000:]
    document = json.loads(ran.stdout)  # pure JSON: the text report is not printed, as `coverage json -o -`
    assert document["schema"] == "safe-tracectx/audit" and document["violations"] == []
    assert f"HTML report written to {os.path.join('html', 'index.html')}" in ran.stderr
    assert not (tmp_path / "-").exists()


def test_json_dash_under_a_launch_is_refused_before_the_program_runs(tmp_path: Path) -> None:
    script = write(tmp_path, "quiet.py", 'print("ran")\n')
    ran = run([*COMMAND, "run", "--json", "-", script], tmp_path, RANK="0", WORLD_SIZE="2")
    assert ran.returncode == 2 and "ran" not in ran.stdout
    assert "--json -: under a launch the ranks share standard output" in ran.stderr.splitlines()[-1]
