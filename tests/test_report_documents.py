"""``report`` and ``combine`` read every document safe-tracectx writes: the pytest plugin's report (a section, a
member, an HTML column per test), standard input, and a newer or older version named as such."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest

from safe_tracectx.cli import main
from safe_tracectx.exitcodes import ExitStatus

TESTS = """
import warnings
warnings.simplefilter("ignore")
from thunder.core.trace import TraceCtx, set_tracectx, reset_tracectx

def test_clean():
    token = set_tracectx(TraceCtx())
    reset_tracectx(token)

def test_leaks_a_set():
    set_tracectx(TraceCtx())  # never reset
"""


def test_the_readme_pytest_command_and_report_work_together(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """README: `pytest --safe-tracectx=audit --safe-tracectx-report=audit.json`, then `safe-tracectx report audit.json`."""
    pytester.makepyfile(test_seeded=TESTS)
    result = pytester.runpytest_subprocess("--safe-tracectx=audit", "--safe-tracectx-report=audit.json", "-p", "no:cacheprovider")
    assert result.ret == 0
    monkeypatch.chdir(pytester.path)
    capsys.readouterr()
    assert main(["report", "audit.json"]) == ExitStatus.OK
    text = capsys.readouterr().out
    assert text.startswith("safe-tracectx pytest report\n")
    assert "mode audit: 2 tests audited, 0 proxies created, 2 trace sets; 1 test with violations" in text
    clean, leaky = text.split("\ntest_seeded.py::test_clean\n")[1].split("\ntest_seeded.py::test_leaks_a_set\n")
    assert "sets 1, resets 1, never reset 0" in clean and "Unbalanced" not in clean
    assert "sets 1, resets 0, never reset 1" in leaky and "never reset: set_tracectx(" in leaky
    assert "[UnbalancedContextError, " in leaky and "fix: " in leaky

    assert main(["report", "audit.json", "--html", "html"]) == ExitStatus.OK
    capsys.readouterr()
    index = (pytester.path / "html" / "index.html").read_text()
    assert "test_seeded.py::test_clean" in index and "test_seeded.py::test_leaks_a_set" in index  # a member per test
    assert index.count("UnbalancedContextError") == 1  # the leaky test's violation, once

    assert main(["combine", "audit.json", "-o", "combined.json"]) == ExitStatus.OK
    assert "combined 2 members of 1 data file (test_seeded.py::test_clean, test_seeded.py::test_leaks_a_set)" in capsys.readouterr().out
    members = json.loads((pytester.path / "combined.json").read_text())["members"]
    assert [(m["name"], len(m["audit"]["leaked_sets"])) for m in members] == [
        ("test_seeded.py::test_clean", 0), ("test_seeded.py::test_leaks_a_set", 1)]


def _audit(version: object = 2) -> dict[str, object]:
    return {"schema": "safe-tracectx/audit", "version": version, "counts": {}, "kept": 0, "dropped": 0, "passes": {},
            "proxies_by_pass": {}, "call_sites": [], "leaked_sets": [], "violations": []}


@pytest.mark.parametrize("command", [["report"], ["combine", "-o", "out.json"]])
def test_a_newer_version_says_upgrade_and_an_older_one_says_so_not_damaged(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], command: list[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "new.json").write_text(json.dumps(_audit(3)))
    (tmp_path / "old.json").write_text(json.dumps(_audit(1)))
    assert main([*command, "new.json"]) == ExitStatus.USAGE_ERROR
    err = capsys.readouterr().err
    assert "new.json was written by a newer safe-tracectx (safe-tracectx/audit version 3; this one reads version 2): " \
           "upgrade safe-tracectx to read it" in err and "damaged" not in err
    assert main([*command, "old.json"]) == ExitStatus.USAGE_ERROR
    err = capsys.readouterr().err
    assert "old.json was written by an older safe-tracectx (safe-tracectx/audit version 1" in err and "damaged" not in err


def test_report_dash_reads_the_document_from_standard_input(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr("sys.stdin", io.StringIO(json.dumps(_audit())))
    assert main(["report", "-"]) == ExitStatus.OK
    assert capsys.readouterr().out.startswith("safe-tracectx audit report\n")
    monkeypatch.setattr("sys.stdin", io.StringIO("[]"))
    assert main(["report", "-"]) == ExitStatus.USAGE_ERROR
    assert "- is not a safe-tracectx data file" in capsys.readouterr().err


# ---- a damaged audit --------------------------------------------------------------------------------

def test_report_calls_an_audit_without_a_version_damaged(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "a.json").write_text('{"schema": "safe-tracectx/audit"}')
    assert main(["report", str(tmp_path / "a.json")]) == 2
    assert "is a damaged safe-tracectx data file: version None" in capsys.readouterr().err
