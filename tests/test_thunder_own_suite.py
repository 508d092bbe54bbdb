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


def _thunder_tests() -> Path:
    import thunder.tests

    return Path(thunder.tests.__file__).parent


@pytest.mark.parametrize("test_file", ["test_core.py", "test_transforms.py", "test_update_aliases.py"])
def test_thunders_own_tests_pass_under_strict_with_nothing_of_ours_said(test_file: str, tmp_path: Path) -> None:
    tests = _thunder_tests()
    if not (tests / test_file).is_file():
        pytest.skip(f"this Thunder ships no {test_file}")
    import safe_tracectx

    here = str(Path(safe_tracectx.__file__).parent.parent)  # the package this test imported, not another install
    path = os.pathsep.join(filter(None, (here, os.environ.get("PYTHONPATH"))))
    env = {**os.environ, "PYTHONPATH": path, "TORCHINDUCTOR_VEC_ISA_OK": "1", "PYTHONWARNINGS": "default"}
    run = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", f"--rootdir={tests}", "-c", os.devnull,
         "--safe-tracectx=strict", f"--junitxml={tmp_path / 'strict.xml'}", str(tests / test_file)],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=1200,
    )
    output = run.stdout + run.stderr
    suite = ElementTree.parse(tmp_path / "strict.xml").getroot()
    suite = suite if suite.tag == "testsuite" else suite[0]
    failed = [f"{case.get('classname')}::{case.get('name')}" for case in suite.iter("testcase")
              if case.find("failure") is not None or case.find("error") is not None]
    assert failed == [], output[-4000:]
    assert int(suite.get("tests", "0")) > 10, output[-4000:]
    ours = sorted({line.strip() for line in output.splitlines() if f"{os.sep}safe_tracectx{os.sep}" in line})
    assert ours == [], "warnings from safe-tracectx's own code:\n" + "\n".join(ours)
    assert " 0 tests with violations" in output, output[-4000:]
