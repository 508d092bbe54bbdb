"""The install matrix (issue 24): the built wheel in fresh virtual environments, used as a user would.

This repository's own environment has every test requirement (pytest-xdist among them), so a
gap in what a plain ``pip install`` gives a user never shows here. Each test below builds a
fresh venv (no system site-packages, no pip of its own: this interpreter's pip installs into it
with ``--python``), installs the wheel built from the checkout, and runs a tiny project there:

- (a) no extras, with pytest only (no xdist): plain ``pytest`` passes untouched,
  ``--safe-tracectx=strict`` is a usage error naming the extra, ``lint``, the pre-commit hook;
- (b) no extras, with flake8: ``flake8 --select STC``, ``lint``, the pre-commit hook;
- (c) ``[thunder]`` with pytest only (no xdist, no test requirements): plain ``pytest`` passes
  untouched (a ``thunder.jit`` test among them), ``pytest --safe-tracectx=strict`` passes those
  and fails a test that leaves a ``set_tracectx`` open, ``lint``, the pre-commit hook.

pytest and flake8 come from the index (through pip's cache). torch and lightning-thunder are
not downloaded again: (c) gets a folder of symbolic links to exactly the distributions of
``lightning-thunder`` and ``torch`` and their dependencies in this interpreter's environment
(package folders and ``.dist-info``, nothing else), added by a ``.pth`` file; pip then resolves
``[thunder]`` against them with ``--no-index``, so a requirement they do not meet fails instead
of downloading. safe-tracectx itself always comes from the wheel, checked in every venv.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import tomllib
import zipfile
from importlib import metadata
from pathlib import Path

import pytest
import yaml
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[1]
PIP = (sys.executable, "-m", "pip")
TIMEOUT = 300

CLEAN_MODULE = """\
from thunder.core.trace import TraceCtx, reset_tracectx, set_tracectx


def with_trace(fn):
    token = set_tracectx(TraceCtx())
    try:
        return fn()
    finally:
        reset_tracectx(token)
"""

UNSAFE_MODULE = """\
from thunder.core.trace import TraceCtx, reset_tracectx, set_tracectx


def leak(fn):
    token = set_tracectx(TraceCtx())
    result = fn()
    reset_tracectx(token)
    return result
"""

PLAIN_TEST = """\
def test_arithmetic():
    assert 1 + 1 == 2
"""

THUNDER_TEST = """\
import thunder
import torch
from thunder.core.trace import TraceCtx

from safe_tracectx import current_trace, tracectx


def test_jit():
    assert thunder.jit(lambda a: a * 2 + 1)(torch.ones(3)).tolist() == [3.0, 3.0, 3.0]


def test_tracectx():
    trace = TraceCtx()
    with tracectx(trace):
        assert current_trace() is trace
    assert current_trace() is None
"""

LEAKING_TEST = """\
from thunder.core.trace import TraceCtx, set_tracectx


def test_leaves_a_trace_set():
    set_tracectx(TraceCtx())
"""

# What a venv says about itself: where safe_tracectx comes from, and what is importable.
PROBE = """\
import importlib.util, json, sys
from importlib import metadata
import safe_tracectx
dist = metadata.distribution("safe-tracectx")
print(json.dumps({
    "prefix": sys.prefix,
    "file": safe_tracectx.__file__,
    "version": safe_tracectx.__version__,
    "url": json.loads(dist.read_text("direct_url.json") or "{}").get("url", ""),
    "importable": {name: importlib.util.find_spec(name) is not None
                   for name in ("xdist", "pytest", "flake8", "torch", "thunder", "hypothesis", "yaml")},
}))
"""


class Venv:
    """A fresh virtual environment and the commands run in it, from the tiny project's folder."""

    def __init__(self, path: Path, project: Path) -> None:
        subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(path)], check=True, timeout=TIMEOUT)
        self.path = path
        self.project = project
        self.bin = path / "bin"
        self.python = self.bin / "python"
        (site,) = (path / "lib").glob("python*/site-packages")
        self.site = site
        self.env = {key: value for key, value in os.environ.items() if not key.startswith(_NOT_INHERITED)}
        self.env.update(PATH=f"{self.bin}{os.pathsep}{os.environ.get('PATH', '')}", VIRTUAL_ENV=str(path))
        self.env["PYTHONDONTWRITEBYTECODE"] = "1"  # the linked packages are this environment's own files

    def pip_install(self, *args: str) -> None:
        command = [*PIP, "--python", str(self.python), "install", "--disable-pip-version-check", *args]
        run = subprocess.run(command, capture_output=True, text=True, timeout=TIMEOUT, env=self.env)
        assert run.returncode == 0, f"{shlex.join(command)}\n{run.stdout}\n{run.stderr}"

    def run(self, *command: str, status: int | None = 0) -> subprocess.CompletedProcess[str]:
        """Run ``command`` (a script of the venv's bin/ by its name) in the project; check its exit status."""
        argv = [str(self.bin / command[0]), *command[1:]]
        run = subprocess.run(argv, capture_output=True, text=True, timeout=TIMEOUT, cwd=self.project, env=self.env)
        if status is not None:
            assert run.returncode == status, f"{shlex.join(command)}: exit {run.returncode}\n{run.stdout}\n{run.stderr}"
        return run

    def probe(self, wheel: Path) -> dict[str, bool]:
        """Check that safe_tracectx is the wheel's, installed in this venv; return what is importable."""
        found = json.loads(self.run("python", "-c", PROBE).stdout)
        assert Path(found["prefix"]) == self.path
        assert Path(found["file"]).is_relative_to(self.site), found["file"]
        assert found["url"].endswith("/" + wheel.name), found["url"]
        assert found["version"] == wheel.name.split("-")[1]
        importable: dict[str, bool] = found["importable"]
        assert not importable["xdist"] and not importable["hypothesis"] and not importable["yaml"]
        return importable


# This session's own settings (PYTHONPATH, PYTEST_ADDOPTS, SAFE_TRACECTX_POLICY, ...) are not the user's.
_NOT_INHERITED = ("PYTHON", "PYTEST_", "SAFE_TRACECTX", "VIRTUAL_ENV")


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The wheel of the checkout, built from a copy (the build writes build/ and *.egg-info)."""
    source = tmp_path_factory.mktemp("source")
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    for name in ["pyproject.toml", project["readme"], *project["license-files"]]:
        shutil.copy2(ROOT / name, source / name)
    shutil.copytree(ROOT / "safe_tracectx", source / "safe_tracectx", ignore=shutil.ignore_patterns("__pycache__"))
    out = tmp_path_factory.mktemp("wheel")
    command = [*PIP, "wheel", "--quiet", "--disable-pip-version-check", "--no-deps", "-w", str(out), str(source)]
    run = subprocess.run(command, capture_output=True, text=True, timeout=TIMEOUT)
    assert run.returncode == 0, f"{shlex.join(command)}\n{run.stdout}\n{run.stderr}"
    (built,) = out.glob("safe_tracectx-*.whl")
    with zipfile.ZipFile(built) as archive:
        names = set(archive.namelist())
        (entry_points,) = (n for n in names if n.endswith(".dist-info/entry_points.txt"))
        declared = archive.read(entry_points).decode()
    shipped = {
        path.relative_to(ROOT).as_posix()
        for path in (ROOT / "safe_tracectx").rglob("*")
        if path.is_file() and "__pycache__" not in path.parts
    }
    assert shipped <= names, f"files of the package missing from the wheel: {sorted(shipped - names)}"
    assert not [n for n in names if n.startswith(("tests/", "history/", "stubs/"))]
    for line in ("safe-tracectx = safe_tracectx.cli:main", "safe_tracectx = safe_tracectx.pytest_plugin",
                 "STC = safe_tracectx.lint.flake8:Flake8Plugin"):
        assert line in declared, declared
    return built


def _tiny_project(path: Path, *, thunder: bool) -> Path:
    """A user's project: a module that is lint-clean, one that is not, and tests."""
    files = {
        "pyproject.toml": '[tool.pytest.ini_options]\ntestpaths = ["tests"]\n',  # leaky/ only when named
        "tracing.py": CLEAN_MODULE,
        "unsafe/leak.py": UNSAFE_MODULE,
        "tests/test_plain.py": PLAIN_TEST,
    }
    if thunder:
        files.update({"tests/test_thunder.py": THUNDER_TEST, "leaky/test_leak.py": LEAKING_TEST})
    for name, text in files.items():
        (path / name).parent.mkdir(parents=True, exist_ok=True)
        (path / name).write_text(text, encoding="utf-8")
    return path


def _check_plain_pytest(venv: Venv, tests: int) -> None:
    """Plain ``pytest``: the plugin is loaded and stays inactive, every test passes untouched."""
    run = venv.run("pytest")
    assert "plugins: safe-tracectx-" in run.stdout, run.stdout  # registered from the wheel's entry point
    assert f"{tests} passed" in run.stdout and "tests audited" not in run.stdout, run.stdout


def _check_linters(venv: Venv, wheel: Path) -> None:
    """``safe-tracectx lint`` and the pre-commit hook's command, as pre-commit runs it (file names appended)."""
    assert "no findings" in venv.run("safe-tracectx", "lint", "tracing.py", "tests").stdout.lower()
    run = venv.run("safe-tracectx", "lint", status=1)
    assert "unsafe/leak.py:5:13: STC001 " in run.stdout
    assert "tracing.py" not in run.stdout and "test_plain.py" not in run.stdout
    (hook,) = yaml.safe_load((ROOT / ".pre-commit-hooks.yaml").read_text(encoding="utf-8"))
    assert hook["language"] == "python" and hook["types"] == ["python"]  # pre-commit: no extras, .py files named
    entry = shlex.split(hook["entry"])
    python_files = sorted(p.relative_to(venv.project).as_posix() for p in venv.project.rglob("*.py"))
    run = venv.run(*entry, *python_files, status=1)
    assert "unsafe/leak.py:5:13: STC001 " in run.stdout and "tracing.py" not in run.stdout
    venv.run(*entry, *[name for name in python_files if not name.startswith(("unsafe/", "leaky/"))])
    assert venv.run("safe-tracectx", "--version").stdout.split() == ["safe-tracectx", wheel.name.split("-")[1]]


def test_no_extras_with_pytest_only(wheel: Path, tmp_path: Path) -> None:
    """(a): ``pip install safe-tracectx pytest``, no xdist, no torch: pytest runs as if we were not there."""
    venv = Venv(tmp_path / "venv", _tiny_project(tmp_path / "project", thunder=False))
    venv.pip_install(str(wheel), "pytest")
    importable = venv.probe(wheel)
    assert importable["pytest"] and not importable["torch"] and not importable["thunder"]
    _check_plain_pytest(venv, tests=1)
    run = venv.run("pytest", "--safe-tracectx=strict", status=pytest.ExitCode.USAGE_ERROR)
    assert "pip install 'lightning-thunder>=0.2.1,<0.3'" in run.stderr and "INTERNALERROR" not in run.stderr + run.stdout
    run = venv.run("python", "-c", "import safe_tracectx; safe_tracectx.tracectx", status=1)
    assert "MissingExtraError" in run.stderr and "pip install 'lightning-thunder>=0.2.1,<0.3'" in run.stderr
    _check_linters(venv, wheel)


def test_no_extras_with_flake8(wheel: Path, tmp_path: Path) -> None:
    """(b): ``pip install safe-tracectx flake8``: the STC rules through flake8, the CLI and the hook."""
    venv = Venv(tmp_path / "venv", _tiny_project(tmp_path / "project", thunder=False))
    venv.pip_install(str(wheel), "flake8")
    importable = venv.probe(wheel)
    assert importable["flake8"] and not importable["pytest"] and not importable["torch"]
    assert "safe-tracectx: " in venv.run("flake8", "--version").stdout.replace("\n", " ")
    run = venv.run("flake8", "--select", "STC", status=1)
    assert run.stdout.splitlines()[0].startswith("./unsafe/leak.py:5:13: STC001 "), run.stdout
    assert len(run.stdout.splitlines()) == 1, run.stdout
    venv.run("flake8", "--select", "STC", "tracing.py", "tests")
    _check_linters(venv, wheel)


def _link_thunder_and_torch(links: Path) -> list[str]:
    """Link lightning-thunder, torch and their dependencies (as installed here) into ``links``."""
    links.mkdir()
    found: dict[str, metadata.Distribution] = {}
    todo: list[str] = ["lightning-thunder", "torch"]
    while todo:
        name = canonicalize_name(todo.pop())
        if name in found:
            continue
        found[name] = dist = metadata.distribution(name)
        for text in dist.requires or []:
            requirement = Requirement(text)
            if requirement.marker is None or requirement.marker.evaluate({"extra": ""}):
                todo.append(requirement.name)
    for found_name, dist in found.items():
        assert dist.files is not None, f"{found_name} has no RECORD: cannot tell its files"
        for top in {file.parts[0] for file in dist.files if file.parts[0] not in ("..", "__pycache__")}:
            target = links / top
            if not target.exists():
                target.symlink_to(Path(str(dist.locate_file(top))).resolve())
    return sorted(found)


def test_thunder_extra_without_the_test_requirements(wheel: Path, tmp_path: Path) -> None:
    """(c): ``pip install "safe-tracectx[thunder]" pytest``, no xdist: the plugin inactive unless asked, then strict."""
    venv = Venv(tmp_path / "venv", _tiny_project(tmp_path / "project", thunder=True))
    links = tmp_path / "thunder-and-torch"
    linked = _link_thunder_and_torch(links)
    assert not {"pytest", "pytest-xdist", "safe-tracectx"} & set(linked), linked
    # addsitedir, not a bare path: it also reads the .pth files there (a Thunder installed editable, say)
    (venv.site / "thunder-and-torch.pth").write_text(f"import site; site.addsitedir({str(links)!r})\n")
    venv.pip_install("--no-index", f"{wheel}[thunder]")  # resolved against the links: no download, or a failure
    venv.pip_install("pytest")
    importable = venv.probe(wheel)
    assert importable["torch"] and importable["thunder"] and importable["pytest"] and not importable["flake8"]
    _check_plain_pytest(venv, tests=3)
    run = venv.run("pytest", "--safe-tracectx=strict", "tests", "leaky", status=pytest.ExitCode.TESTS_FAILED)
    assert re.search(r"=+ 4 passed, (\d+ warnings?, )?1 error in ", run.stdout), run.stdout  # the leak's teardown
    assert "mode strict: 4 tests audited" in run.stdout and "1 test with violations" in run.stdout, run.stdout
    assert "ERROR at teardown of test_leaves_a_trace_set" in run.stdout and "UnbalancedContextError" in run.stdout
    assert "never reset: set_tracectx(" in run.stdout and "at leaky/test_leak.py:5" in run.stdout, run.stdout
    _check_linters(venv, wheel)
