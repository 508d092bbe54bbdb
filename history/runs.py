"""One case at one commit in one mode (plain, strict, audit): a subprocess, and what it showed.

The program (or Thunder's regression test) runs with the commit's ``thunder/``
first on ``PYTHONPATH`` and this checkout next; strict and audit go through ``safe-tracectx run`` (or
the pytest plugin), which writes the audit as JSON. Our violations are read
from there, never from the text; the exception that ended the run is read from
the traceback's last line.
"""

from __future__ import annotations

import dataclasses
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Final, Literal

from history.cases import Case
from history.packages import ROOT, History, extra_packages

__all__ = ["MODES", "Mode", "RunResult", "pythonpath", "run_case", "run_program"]

Mode = Literal["plain", "strict", "audit"]
MODES: Final[tuple[Mode, ...]] = ("plain", "strict", "audit")
TIMEOUT: Final = int(os.environ.get("HISTORY_TIMEOUT", "900"))

_OURS: Final = re.compile(r"^(?:E\s+)?safe_tracectx\.errors\.(\w+)(?::|$)")
_RAISED: Final = re.compile(r"^(?:E\s+)?((?:[A-Za-z_]\w*\.)*[A-Za-z_]\w*(?:Error|Exception|Exit|Interrupt))(?::|$)")
_NOTE: Final = re.compile(r"^(?:E\s+)?safe-tracectx: (.*)$")
#: pytest's exit statuses for an interrupted run, an internal error, a usage error, no tests collected.
_PYTEST_USAGE: Final = (2, 3, 4, 5)
PYTEST_INI: Final = "[pytest]\naddopts = -p no:cacheprovider\nfilterwarnings =\n    ignore::DeprecationWarning\n"


@dataclasses.dataclass
class RunResult:
    """What one run showed."""

    mode: Mode
    commit: str
    returncode: int
    seconds: float
    #: The class of our error that ended the run (NameClashError, ...), if one did.
    ours_raised: str | None
    #: The last exception the run printed that is not ours (Thunder's own failure), if any.
    other_raised: str | None
    #: Our violations from the audit document (message, check, code, action, and the structured fields).
    violations: list[dict[str, Any]]
    #: Our notes on an exception we did not replace ("safe-tracectx: ..." lines).
    notes: list[str]
    tail: str

    @property
    def failed(self) -> bool:
        return self.returncode != 0

    @property
    def stopped_by_ours(self) -> bool:
        """Our error ended the run, or was raised and handled by the program: ours are RuntimeErrors, and a program
        that checks for eager's RuntimeError gets ours instead of Thunder's silence."""
        return self.ours_raised is not None or any(v.get("action") == "raise" for v in self.violations)

    @property
    def harness_error(self) -> str | None:
        """Why the run says nothing about Thunder (a test not collected, a missing module), if it does not."""
        if self.returncode in _PYTEST_USAGE:
            return f"pytest exit {self.returncode}"
        if self.other_raised in ("ModuleNotFoundError", "ImportError") and self.ours_raised is None:
            return self.other_raised
        if self.returncode == -9:
            return "timeout"
        return None

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


def _test_folder(history: History, case: Case, parent: str, fix: str) -> tuple[Path, str]:
    """A folder with the fix's test file and the parent's conftest, and the node id to run in it."""
    assert case.test is not None
    path, _, node = case.test.partition("::")
    folder = history.cache / "tests" / f"{case.id}-{fix[:12]}-{parent[:12]}"
    target = folder / Path(path).name
    if not target.is_file():
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "pytest.ini").write_text(PYTEST_INI)
        conftest = str(Path(path).parent / "conftest.py")
        try:
            (folder / "conftest.py").write_bytes(history.file_at(parent, conftest))
        except Exception:  # noqa: BLE001 - a commit without a conftest
            pass
        target.write_bytes(history.file_at(fix, path))
    return folder, f"{target.name}::{node}" if node else target.name


def _command(case: Case, mode: Mode, report: Path, test: tuple[Path, str] | None) -> list[str]:
    python = sys.executable
    if test is not None:
        folder, node = test
        command = [python, "-m", "pytest", "-q", "-x", "-c", str(folder / "pytest.ini"), "--rootdir", str(folder),
                   str(folder / node)]
        if mode != "plain":
            command += [f"--safe-tracectx={mode}", f"--safe-tracectx-report={report}"]
        return command
    program = [str(case.program_path), *case.args]
    if mode == "plain":
        return [python, *program]
    return [python, "-m", "safe_tracectx", "run", "--policy", mode, "--top", "0", "--json", str(report), *program]


def _violations(report: Path) -> list[dict[str, Any]]:
    try:
        document = json.loads(report.read_text())
    except (OSError, ValueError):
        return []
    if "tests" in document:  # the pytest plugin's report
        return [v for test in document["tests"].values() for v in test.get("violations", [])]
    found: list[dict[str, Any]] = document.get("violations", [])
    return found


def _raised(lines: list[str]) -> tuple[str | None, str | None]:
    ours = other = None
    for line in lines:
        if (match := _OURS.match(line)) is not None:
            ours = match.group(1)
        elif (match := _RAISED.match(line)) is not None and not match.group(1).startswith("safe_tracectx."):
            other = match.group(1)
    return ours, other


def pythonpath(package: Path, extra: Path | None, inherited: str | None) -> str:
    """The commit's ``thunder/`` first, then the extra packages a case needs, then this checkout (so the run
    imports the ``safe_tracectx`` of the tree the runner is in, not whichever one the environment installed),
    then what the caller had."""
    return os.pathsep.join([str(package), *([str(extra)] if extra else []), str(ROOT), *filter(None, [inherited])])


def run_program(
    history: History, case: Case, revision: str, mode: Mode, *, test_from: tuple[str, str] | None = None
) -> RunResult:
    """Run ``case`` with Thunder at ``revision`` in ``mode`` (``test_from``: the (parent, fix) the test is taken from)."""
    commit = history.resolve(revision)
    package = history.package(commit)
    extra = extra_packages(case.needs, history.cache)
    test = None
    if case.test is not None:
        parent, fix = test_from if test_from is not None else (commit, commit)
        test = _test_folder(history, case, history.resolve(parent), history.resolve(fix))
    with tempfile.TemporaryDirectory(prefix=f"history-{case.id}-") as scratch:
        report = Path(scratch) / "audit.json"
        env = dict(os.environ)
        env["PYTHONPATH"] = pythonpath(package, extra, env.get("PYTHONPATH"))
        env.pop("SAFE_TRACECTX_POLICY", None)
        env["PYTHONUNBUFFERED"] = "1"
        started = time.perf_counter()
        try:
            done = subprocess.run(
                _command(case, mode, report, test), cwd=scratch, env=env, capture_output=True, text=True,
                timeout=TIMEOUT, check=False,
            )
            code, output = done.returncode, done.stdout + "\n" + done.stderr
        except subprocess.TimeoutExpired as expired:
            code = -9
            partial = [_text(expired.stdout), _text(expired.stderr), f"TimeoutExpired: after {TIMEOUT} s"]
            output = "\n".join(partial)
        seconds = time.perf_counter() - started
        lines = [line.rstrip() for line in output.splitlines()]
        ours, other = _raised(lines)
        notes = [m.group(1) for line in lines if (m := _NOTE.match(line.strip())) is not None]
        return RunResult(mode, commit, code, seconds, ours, other, _violations(report), notes, "\n".join(lines[-40:]))


def run_case(history: History, case: Case, modes: tuple[Mode, ...] = MODES) -> dict[str, dict[Mode, RunResult]]:
    """The case at its parent and at its fix, in each mode: ``{"parent": {...}, "fix": {...}}``."""
    pair = (case.parent, case.fix)
    return {
        side: {mode: run_program(history, case, revision, mode, test_from=pair) for mode in modes}
        for side, revision in (("parent", case.parent), ("fix", case.fix))
    }


def _text(stream: str | bytes | None) -> str:
    if isinstance(stream, bytes):
        return stream.decode(errors="replace")
    return stream or ""
