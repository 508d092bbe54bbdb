"""Thunder's own tests (shipped in its wheel) under ``--safe-tracectx=strict``: every one passes as it does plain,
no violation is reported, and nothing of ours warns (an internal error, or torch's warning about a tensor our
comparison read).

A few hundred working programs that nobody wrote for this package: the checks that replay programs (gradients,
outputs, updates) were added over several stops while only ``scripts/thunder_suite.sh`` ran these, by hand, and
the run that came back after them found an internal error on a sparse tensor (``test_clone_sparse_coo``) and a torch
warning shown to the user (``test_dataclass_output[True]``). The files here are the fast, deterministic part of the
script's selection (about a minute); the script runs the rest, plain against strict, test by test."""

from __future__ import annotations

import os
import subprocess
import sys
import xml.etree.ElementTree as ElementTree
from pathlib import Path

import pytest

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")

#: What the caller's environment may set that changes which tests the run selects, or how the plugin acts.
_NOT_HANDED_ON = ("PYTEST_ADDOPTS", "PYTEST_DISABLE_PLUGIN_AUTOLOAD", "PYTEST_PLUGINS")


def _thunder_tests() -> Path:
    import thunder.tests

    return Path(thunder.tests.__file__).parent


def _pytest(tests: Path, where: Path, *arguments: str) -> tuple[str, list[str], int]:
    """Run pytest on Thunder's ``tests`` in ``where``, with this process's import path (the same Thunder, the same
    safe_tracectx); its output, the tests that failed or erred (class and name), and how many tests ran."""
    env = {k: v for k, v in os.environ.items() if k not in _NOT_HANDED_ON and not k.startswith("SAFE_TRACECTX")}
    env.update(PYTHONPATH=os.pathsep.join(p for p in sys.path if p), TORCHINDUCTOR_VEC_ISA_OK="1",
               PYTHONWARNINGS="default")
    report = where / f"report-{len(list(where.glob('report-*.xml')))}.xml"
    run = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", f"--rootdir={tests}", "-c", os.devnull,
         f"--junitxml={report}", *arguments],
        cwd=where, env=env, capture_output=True, text=True, timeout=1200,
    )
    output = run.stdout + run.stderr
    assert report.is_file(), f"pytest wrote no report (exit {run.returncode}):\n{output[-4000:]}"
    suite = ElementTree.parse(report).getroot()
    suite = suite if suite.tag == "testsuite" else suite[0]
    failed = [f"{case.get('classname')}::{case.get('name')}" for case in suite.iter("testcase")
              if case.find("failure") is not None or case.find("error") is not None]
    return output, failed, int(suite.get("tests", "0"))


@pytest.mark.parametrize("test_file", ["test_core.py", "test_transforms.py", "test_update_aliases.py"])
def test_thunders_own_tests_pass_under_strict_with_nothing_of_ours_said(test_file: str, tmp_path: Path) -> None:
    tests = _thunder_tests()
    if not (tests / test_file).is_file():
        pytest.skip(f"this Thunder ships no {test_file}")
    output, failed, ran = _pytest(tests, tmp_path, "--safe-tracectx=strict", str(tests / test_file))
    assert ran > 10, output[-4000:]
    if failed:  # a test that fails plain too (a flake, this machine) is Thunder's, not ours
        _, failed_plain, _ = _pytest(tests, tmp_path, str(tests / test_file))
        assert sorted(set(failed) - set(failed_plain)) == [], output[-4000:]
    said = sorted({line.strip() for line in output.splitlines() if f"{os.sep}safe_tracectx{os.sep}" in line})
    assert said == [], "warnings from safe-tracectx's own code:\n" + "\n".join(said)
    assert " 0 tests with violations" in output, output[-4000:]
