"""Packaging: the linter needs no extra; a run-time part without Thunder names the extra to install."""

from __future__ import annotations

import re
import subprocess
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

# Hide torch and Thunder from the interpreter, as in a venv with `pip install safe-tracectx` (no extras).
HIDE = (
    "import sys\n"
    "class Hide:\n"
    "    def find_spec(self, name, path=None, target=None):\n"
    "        if name.split('.')[0] in ('torch', 'thunder'):\n"
    "            raise ModuleNotFoundError(f'No module named {name!r}', name=name)\n"
    "sys.meta_path.insert(0, Hide())\n"
)


def _run(code: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", HIDE + code], capture_output=True, text=True, timeout=120, cwd=ROOT)


def test_the_linter_works_without_torch_and_thunder() -> None:
    run = _run("from safe_tracectx.cli import main\nsys.exit(main(['lint', 'safe_tracectx/lint']))")
    assert run.returncode == 0, run.stderr


def test_a_runtime_part_without_the_extra_names_it() -> None:
    run = _run("import safe_tracectx\nsafe_tracectx.tracectx")
    assert run.returncode == 1 and "pip install 'lightning-thunder>=0.2.1,<0.3'" in run.stderr
    run = _run("import safe_tracectx.traces.checks")
    assert "pip install 'lightning-thunder>=0.2.1,<0.3'" in run.stderr
    run = _run("from safe_tracectx.cli import main\nsys.exit(main(['run', 'x.py']))")
    assert run.returncode == 2 and "safe-tracectx run: error:" in run.stderr and "lightning-thunder>=0.2.1" in run.stderr


def test_the_metadata_keeps_thunder_an_extra_and_declares_the_license_file() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert project["dependencies"] == []
    assert any(req.startswith("lightning-thunder") for req in project["optional-dependencies"]["thunder"])
    assert "test" not in project["optional-dependencies"]  # dev-only requirements live in requirements/
    assert project["license"] == "Apache-2.0" and "Apache License" in (ROOT / "LICENSE").read_text()
    stubs = tomllib.loads((ROOT / "stubs" / "pyproject.toml").read_text())["project"]["name"]
    assert f"`{stubs}`" in (ROOT / "README.md").read_text()


def test_the_readmes_pre_commit_rev_and_release_tag_are_the_project_version() -> None:
    """The README's snippets name the tag of this version (``git tag -a v<version>`` at the release), so they
    cannot drift from ``pyproject.toml``."""
    version = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]
    readme = (ROOT / "README.md").read_text()
    assert re.findall(r"^\s*rev:\s*(\S+)", readme, flags=re.MULTILINE) == [f"v{version}"]  # the pre-commit snippet
    tags = re.findall(r"git\+https://\S+?\.git@(\S+?)[\"'\s]", readme)
    assert tags and set(tags) == {f"v{version}"}
