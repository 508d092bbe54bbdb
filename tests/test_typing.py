"""mypy --strict on tests/typing: what must pass, what must be rejected (with its error code), revealed types.

Also the types as a user gets them: mypy finds the package from a project outside the checkout; the Thunder stubs
reject nothing Thunder's inline types accept; misspelt presets, actions, pass kinds and roles are mypy errors.
"""

from __future__ import annotations

import ast
import dataclasses
import importlib
import inspect
import os
import re
import subprocess
import sys
import sysconfig
from collections import defaultdict
from pathlib import Path
from typing import Any, get_args

import pytest
from mypy import api

import safe_tracectx
from safe_tracectx._support.pass_catalog import KINDS
from safe_tracectx.hooks.audited import ROLES
from safe_tracectx.policy import PRESETS, CheckAction, MissingTraceAction

ROOT = Path(__file__).resolve().parents[1]
TYPING = Path(__file__).resolve().parent / "typing"
STUBS = ROOT / "stubs" / "thunder-stubs"
EXPECT = re.compile(r"#\s*(?P<kind>[EN]): (?P<text>.*)$")
REPORTED = re.compile(r"^(?P<file>[^:]+):(?P<line>\d+): (?P<kind>error|note): (?P<text>.*)$")


def _expected(path: Path) -> dict[int, list[str]]:
    found: dict[int, list[str]] = defaultdict(list)
    for number, line in enumerate(path.read_text().splitlines(), start=1):
        match = EXPECT.search(line)
        if match and not line.lstrip().startswith("#"):
            found[number].append(f"{match['kind']}: {match['text'].strip()}")
    return found


@pytest.fixture(scope="module")
def reported() -> dict[tuple[str, int], list[str]]:
    files = [str(path) for path in sorted(TYPING.glob("*.py"))]
    # No config file: the project config excludes tests/typing from the main run.
    stdout, stderr, _ = api.run(["--config-file=", "--strict", "--no-error-summary", "--hide-error-context", *files])
    assert not stderr, stderr
    found: dict[tuple[str, int], list[str]] = defaultdict(list)
    for line in stdout.splitlines():
        match = REPORTED.match(line)
        assert match, f"unparsed mypy output: {line}"
        text = match["text"]
        if match["kind"] == "error":
            code = re.search(r"\[([a-z-]+)\]$", text)
            found[(Path(match["file"]).name, int(match["line"]))].append(f"E: [{code[1] if code else '?'}]")
        elif text.startswith("Revealed type is"):
            found[(Path(match["file"]).name, int(match["line"]))].append(f"N: {text}")
    return found


@pytest.mark.parametrize("name", ["accepted.py", "accepted_thunder.py", "rejected.py"])
def test_mypy_reports_exactly_what_the_file_expects(name: str, reported: dict[tuple[str, int], list[str]]) -> None:
    expected = _expected(TYPING / name)
    actual = {line: sorted(messages) for (file, line), messages in reported.items() if file == name}
    assert actual == {line: sorted(messages) for line, messages in expected.items()}


def test_the_rejected_file_covers_the_promised_misuses() -> None:
    text = (TYPING / "rejected.py").read_text()
    for misuse in ('tracectx("not a trace")', "rename(proxy, 3, trace=trace)", 'Policy(missing_trace="explode")', "scratch_trace(reserve=trace)"):
        assert misuse in text
    for misspelt in (
        'use_policy("strcit")',
        'use_policy("strict", read_only="raies")',
        'audited_pass("x", kind="fusoin")',
        'audited_pass("x", role="fwd")',
        'install("lenint")',
        'Policy(name_clash="raies")',
        'STRICT.replace(name_clash="raies")',
    ):
        assert misspelt in text


# -- Misspellings: mypy errors for typed code, the same run-time errors as before for untyped callers.


def _misspelt_lines() -> list[str]:
    text = (TYPING / "rejected.py").read_text()
    section = text[text.index("# Misspelt presets") :]
    return [line.split("#")[0].strip() for line in section.splitlines() if "# E:" in line]


def test_the_literals_are_the_values_the_run_time_checks_take() -> None:
    assert get_args(safe_tracectx.PresetName) == tuple(PRESETS)
    assert set(get_args(safe_tracectx.OverrideAction)) == set(get_args(MissingTraceAction)) | set(get_args(CheckAction))
    assert get_args(safe_tracectx.PassKind) == KINDS
    assert (None, *get_args(safe_tracectx.PassRole)) == ROLES


@pytest.mark.parametrize("call", _misspelt_lines())
def test_each_misspelling_mypy_rejects_still_raises_for_an_untyped_caller(call: str) -> None:
    from safe_tracectx.hooks import is_installed

    namespace: dict[str, Any] = {name: getattr(safe_tracectx, name) for name in safe_tracectx.__all__}
    with pytest.raises(ValueError, match="is not a|not a valid action|unknown policy check"):
        eval(call, namespace)
    assert not is_installed() and safe_tracectx.get_policy() is safe_tracectx.STRICT


# -- The package as a user's mypy sees it.


def _makefile_install_line() -> str:
    text = (ROOT / "Makefile").read_text().replace("\\\n", " ")
    return next(line for line in text.splitlines() if "pip install" in line and " -e " in line)


def test_the_makefile_installs_the_package_editable_in_a_mode_static_tools_can_read() -> None:
    # setuptools' default editable install is an import hook: Python follows it, mypy and pyright do not.
    assert re.search(r"--config-settings[= ]editable_mode=(compat|strict)\b", _makefile_install_line())


_USER_FILE = """\
from thunder.core.trace import TraceCtx

import safe_tracectx
from safe_tracectx import tracectx, use_policy

reveal_type(safe_tracectx.STRICT)
with tracectx(TraceCtx()) as trace:
    reveal_type(trace)
tracectx("not a trace")
use_policy("strcit")
"""


def _mypy_environment() -> dict[str, str]:
    return {key: value for key, value in os.environ.items() if key not in ("PYTHONPATH", "MYPYPATH")}


def test_mypy_finds_the_package_and_its_types_from_a_project_outside_the_checkout(tmp_path: Path) -> None:
    assert not tmp_path.resolve().is_relative_to(ROOT)
    (tmp_path / "user.py").write_text(_USER_FILE)
    run = subprocess.run(
        [sys.executable, "-m", "mypy", "--config-file=", "--strict", "--no-error-summary", "--hide-error-context",
         f"--cache-dir={tmp_path / 'cache'}", "user.py"],
        cwd=tmp_path, env=_mypy_environment(), capture_output=True, text=True, timeout=900,
    )
    assert not run.stderr, run.stderr
    lines = [re.sub(r"^(user\.py:\d+: \w+: ).*(\[[a-z-]+\])$", r"\1\2", line) for line in run.stdout.splitlines()]
    assert lines == [
        'user.py:6: note: Revealed type is "safe_tracectx.policy.Policy"',
        'user.py:8: note: Revealed type is "thunder.core.trace.TraceCtx"',
        "user.py:9: error: [type-var]",
        "user.py:10: error: [arg-type]",
    ], run.stdout


# -- The Thunder stubs never reject what Thunder's inline types accept.

# mypy run with Thunder's inline types only: the same site-packages, less the stub package.
_WITHOUT_STUBS = """\
import sys

import mypy.pyinfo
from mypy import api

real, bare = sys.argv[1:3]
sys_path, _ = mypy.pyinfo.getsearchdirs()
mypy.pyinfo.getsearchdirs = lambda: ([bare if p == real else p for p in sys_path], [bare])
stdout, stderr, status = api.run(sys.argv[3:])
sys.stdout.write(stdout)
sys.stderr.write(stderr)
"""


def test_the_thunder_file_is_valid_thunder_code_which_mypy_passes_without_the_stubs(tmp_path: Path) -> None:
    real = Path(sysconfig.get_paths()["purelib"])
    assert (real / "thunder-stubs").is_dir(), "install the stubs (pip install ./stubs): the typing files need them"
    bare = tmp_path / "site-packages"
    bare.mkdir()
    for entry in real.iterdir():
        if entry.name != "thunder-stubs" and not entry.name.startswith("safe_tracectx_thunder_stubs"):
            (bare / entry.name).symlink_to(entry)
    run = subprocess.run(
        [sys.executable, "-c", _WITHOUT_STUBS, str(real), str(bare), "--config-file=", "--strict", "--no-error-summary",
         "--hide-error-context", f"--cache-dir={tmp_path / 'cache'}", str(TYPING / "accepted_thunder.py")],
        cwd=tmp_path, env=_mypy_environment(), capture_output=True, text=True, timeout=900,
    )
    assert not run.stderr, run.stderr
    assert [line for line in run.stdout.splitlines() if ": error:" in line] == []
    # Thunder's own type, not the stubs': the run did not see them.
    assert 'Revealed type is "list[thunder.core.baseutils.BoundSymbolInterface]"' in run.stdout


def _stub_modules() -> list[tuple[str, ast.Module]]:
    found = []
    for path in sorted(STUBS.rglob("*.pyi")):
        module = ".".join(("thunder", *path.relative_to(STUBS).with_suffix("").parts))
        found.append((module, ast.parse(path.read_text())))
    return found


def _is_any_getattr(node: ast.stmt, *, method: bool) -> bool:
    if not (isinstance(node, ast.FunctionDef) and node.name == "__getattr__"):
        return False
    params = [arg for arg in node.args.args if not (method and arg.arg == "self")]
    return (
        len(params) == 1
        and params[0].annotation is not None
        and ast.unparse(params[0].annotation) == "str"
        and node.returns is not None
        and ast.unparse(node.returns) == "Any"
    )


def test_the_stub_files_are_every_thunder_module_they_claim() -> None:
    modules = dict(_stub_modules())
    assert set(modules) == {"thunder.core.proxies", "thunder.core.symbol", "thunder.core.trace", "thunder.dev_utils.check_trace"}
    assert (STUBS / "py.typed").read_text().strip() == "partial"


@pytest.mark.parametrize("module", [name for name, _ in _stub_modules()])
def test_each_stub_module_is_partial_and_declares_every_class_as_thunder_has_it(module: str) -> None:
    tree = dict(_stub_modules())[module]
    # The names left out are Any (def __getattr__(name: str) -> Any), never an error.
    assert any(_is_any_getattr(node, method=False) for node in tree.body), f"{module}: no module __getattr__"
    real = importlib.import_module(module)
    stubbed = {node.name: node for node in tree.body if isinstance(node, ast.ClassDef)}
    # A class named through the module __getattr__ is Any, which --strict refuses to subclass: declare them all.
    classes = {name: value for name, value in vars(real).items() if inspect.isclass(value) and value.__module__ == module}
    assert sorted(set(classes) - set(stubbed)) == [], f"{module}: classes missing from the stub"
    for name, node in stubbed.items():
        if name in classes:
            _check_stub_class(module, node, classes[name], stubbed)


# Dunders mypy does not look for (construction, pickling, printing) or that ``object`` already has for it.
_NOT_CHECKED = {
    "__init__", "__new__", "__init_subclass__", "__post_init__", "__repr__", "__str__", "__format__", "__getstate__",
    "__setstate__", "__reduce__", "__reduce_ex__", "__setattr__", "__delattr__", "__getattr__", "__getattribute__",
    "__dir__", "__sizeof__", "__subclasshook__", "__class_getitem__", "__copy__", "__deepcopy__",
}


def _check_stub_class(module: str, node: ast.ClassDef, real: type, stubbed: dict[str, ast.ClassDef]) -> None:
    where = f"{module}.{node.name}"
    bases = [ast.unparse(base).split("[")[0].split(".")[-1] for base in node.bases]
    assert bases == [base.__name__ for base in real.__bases__ if base is not object], f"{where}: Thunder's bases"
    # The names the stub gives it: its own, its stubbed ancestors', and those of the classes it derives from
    # outside the stubs (Thunder's interfaces, Enum, tuple, ...), whose types mypy reads from their source.
    declared: set[str] = set()
    has_getattr = False
    pending = [node]
    while pending:
        current = pending.pop()
        for item in current.body:
            if isinstance(item, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
                declared.add(item.name)
                has_getattr |= _is_any_getattr(item, method=True)
            elif isinstance(item, ast.AnnAssign) and isinstance(item.target, ast.Name):
                declared.add(item.target.id)
            elif isinstance(item, ast.Assign):
                declared.update(target.id for target in item.targets if isinstance(target, ast.Name))
        for base in current.bases:
            name = ast.unparse(base).split("[")[0].split(".")[-1]
            if name in stubbed:
                pending.append(stubbed[name])
    outside = [cls for cls in real.__mro__ if cls.__module__ not in _stubbed_modules() and cls is not object]
    for cls in outside:
        declared.update(dir(cls))
    thunders = [cls for cls in real.__mro__ if cls.__module__ in _stubbed_modules()]
    public = {name for cls in thunders for name in vars(cls) if not name.startswith("_")}
    if public - declared:
        assert has_getattr, f"{where} leaves out {sorted(public - declared)} but has no __getattr__(self, name: str) -> Any"
    # Operators and protocols: mypy looks them up on the class, never through __getattr__.
    dunders = {
        name for cls in thunders for name, value in vars(cls).items()
        if name.startswith("__") and name.endswith("__") and callable(value) and name not in _NOT_CHECKED
    }
    assert sorted(dunders - declared) == [], f"{where}: Thunder's operators missing from the stub"
    if dataclasses.is_dataclass(real):
        assert "__dataclass_fields__" in declared, f"{where} is a dataclass in Thunder (dataclasses.replace takes it)"


def _stubbed_modules() -> set[str]:
    return {name for name, _ in _stub_modules()}
