"""pytest's face of ``safe-tracectx sweep``: ``--safe-tracectx-sweep`` sweeps each selected test's call.

    pytest tests/test_model.py::test_step --safe-tracectx-sweep
    pytest tests/test_model.py::test_step --safe-tracectx-sweep --safe-tracectx-sweep-max 50

The test runs once as usual; then pytest is run again for that one test, once to
count the injection points and once per point to fail it (the test's fixtures set
up afresh each time). Fresh processes, not forks: after the test has run, torch's
OpenMP pool exists, and a child forked from it hangs at its first parallel op. A
point that leaves a trace active, a set open (named by its line), a masked
exception, a thread dead of the fault or a changed input trace, or whose run took
another path than the counting run, fails the test with the sweep's report.
Importing this module imports neither torch nor Thunder.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
from collections.abc import Generator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from safe_tracectx.sweep.findings import RunResult

__all__ = ["SweepFailed", "add_options", "is_a_run", "pytest_collection_modifyitems", "pytest_runtest_call"]

#: The options of one run of a sweep, given to the pytest it starts (not for users).
_POINT, _RESULT, _NODE = "--safe-tracectx-sweep-point", "--safe-tracectx-sweep-result", "--safe-tracectx-sweep-node"
#: Options whose file a run must not overwrite (dest, flag): the run writes its own in the sweep's folder.
_OUTPUT_FILES = (("xmlpath", "--junitxml"), ("safe_tracectx_report", "--safe-tracectx-report"), ("reportlog", "--report-log"))


class SweepFailed(AssertionError):
    """A fault injected into the test's call broke a trace-context invariant."""


def add_options(group: pytest.OptionGroup) -> None:
    """The sweep's options, in the plugin's group."""
    group.addoption(
        "--safe-tracectx-sweep",
        action="store_true",
        default=False,
        help="re-run each test's call failing each set_tracectx, proxy creation and pass entry in turn",
    )
    group.addoption("--safe-tracectx-sweep-max", type=int, default=None, metavar="N", help="a seeded sample of N points")
    group.addoption("--safe-tracectx-sweep-seed", type=int, default=0, metavar="SEED", help="the sample's seed")
    group.addoption(_POINT, default=None, help=argparse.SUPPRESS)
    group.addoption(_RESULT, default=None, help=argparse.SUPPRESS)
    group.addoption(_NODE, default=None, help=argparse.SUPPRESS)


def is_a_run(config: pytest.Config) -> bool:
    """This pytest is one run of a sweep started by another."""
    return config.getoption(_POINT, None) is not None


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """A run of a sweep runs its one test only."""
    if is_a_run(config):
        node = config.getoption(_NODE)
        items[:] = [item for item in items if item.nodeid == node]


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item) -> Generator[None, object, object]:
    __tracebackhide__ = True
    if is_a_run(item.config):
        _run_here(item)
        return (yield)
    result = yield
    if item.config.getoption("--safe-tracectx-sweep"):
        from safe_tracectx.sweep.text import render
        from safe_tracectx.sweep.runner import sweep_runs

        with tempfile.TemporaryDirectory(prefix="safe-tracectx-sweep-") as folder:
            found = sweep_runs(
                _RunsInFreshPytest(item, Path(folder)),
                max_runs=item.config.getoption("--safe-tracectx-sweep-max"),
                seed=item.config.getoption("--safe-tracectx-sweep-seed"),
            )
        item.user_properties.append(("safe_tracectx_sweep", found.to_dict()))
        if found.findings:
            raise SweepFailed(render(found, item.nodeid))
    return result


def _run_here(item: pytest.Item) -> None:
    """In a run's pytest: the test's call becomes the run (counting, or failing its point), its result a file."""
    from safe_tracectx.sweep.runner import SWEEP_POLICY, result_json, run_once

    point = item.config.getoption(_POINT)
    target = None if point == "count" else int(point)
    call = item.runtest

    def run() -> None:
        # The call is not the program: a fixture's teardown may stop the threads it started, so no join.
        payload = result_json(lambda: run_once(call, target, SWEEP_POLICY, join_threads=False))
        Path(item.config.getoption(_RESULT)).write_text(payload, encoding="utf-8")

    setattr(item, "runtest", run)  # pytest's own pytest_runtest_call calls it


class _RunsInFreshPytest:
    """The sweep's runs of ``item``: ``python -m pytest`` again, with the options it was given, for it alone."""

    def __init__(self, item: pytest.Item, folder: Path) -> None:
        self.item = item
        self.folder = folder

    def __call__(self, target: int | None) -> RunResult:
        from safe_tracectx.sweep.findings import RunResult
        from safe_tracectx.sweep.runner import RUN_TIMEOUT_SECONDS

        result = self.folder / "result.json"
        result.unlink(missing_ok=True)
        command = self.command("count" if target is None else str(target), result)
        try:
            done = subprocess.run(
                command,
                cwd=self.item.config.invocation_params.dir,
                stdin=subprocess.DEVNULL,
                capture_output=True,
                text=True,
                timeout=RUN_TIMEOUT_SECONDS,
            )
        except subprocess.TimeoutExpired:
            return RunResult.ended_without_result("timed out", f"the run took longer than {RUN_TIMEOUT_SECONDS} s")
        if not result.exists():
            tail = "\n".join((done.stdout + done.stderr).strip().splitlines()[-15:])
            problem = f"the run's pytest ended (exit status {done.returncode}) without running the test:\n{tail}"
            return RunResult.ended_without_result("crashed", problem)
        return RunResult.from_json(result.read_text(encoding="utf-8"))

    def command(self, point: str, result: Path) -> list[str]:
        """The user's command line with the test's id for its paths, and the run's own files and options."""
        config = self.item.config
        args = _without_paths(config, list(config.invocation_params.args))
        _, _, inside = self.item.nodeid.partition("::")
        args.append(str(self.item.path) + (f"::{inside}" if inside else ""))
        # the one path named could give the run another rootdir (node ids are relative to it): keep this one's
        if not getattr(config.option, "rootdir", None):
            args.append(f"--rootdir={config.rootpath}")
        if config.inipath is not None and not getattr(config.option, "inifilename", None):
            args += ["-c", str(config.inipath)]
        args.append(f"--basetemp={self.folder / 'tmp'}")  # pytest empties it: never the user's, in use by the test
        if config.pluginmanager.hasplugin("cacheprovider"):  # nor the user's last-failed tests
            args += ["-o", f"cache_dir={self.folder / 'cache'}"]
        args += [f"{flag}={self.folder / dest}" for dest, flag in _OUTPUT_FILES if getattr(config.option, dest, None)]
        if getattr(config.option, "numprocesses", None):
            args += ["-n", "0"]  # pytest-xdist: the run is one test, in the run's own process
        return [sys.executable, "-m", "pytest", *args, f"{_POINT}={point}", f"{_RESULT}={result}", f"{_NODE}={self.item.nodeid}"]


def _without_paths(config: pytest.Config, args: list[str]) -> list[str]:
    """``args`` without the paths and test ids they name (an option's value that looks the same is kept)."""
    paths = set(config.option.file_or_dir or ())
    parser: argparse.ArgumentParser = getattr(config._parser, "optparser", None) or getattr(config._parser, "_getparser")()
    takes_value = {flag for action in parser._actions if action.nargs != 0 for flag in action.option_strings}
    kept: list[str] = []
    for previous, arg in zip([None, *args], args):
        if arg not in paths or (previous in takes_value and "--" not in kept):
            kept.append(arg)
    return kept
