"""The package's shape: no import cycle, every module importable alone, small modules, lint without torch."""

from __future__ import annotations

import ast
import os
import subprocess
import sys
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "safe_tracectx"
MODULES = sorted(
    ".".join(path.relative_to(PACKAGE.parent).with_suffix("").parts).removesuffix(".__init__")
    for path in PACKAGE.rglob("*.py")
)


def _imports(module: str) -> set[str]:
    """Every module of the package that ``module`` imports, at any level of its code (lazy imports too)."""
    path = PACKAGE.parent / (module.replace(".", "/") + ".py")
    if not path.exists():
        path = PACKAGE.parent / module.replace(".", "/") / "__init__.py"
    is_package = path.name == "__init__.py"
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = module.split(".")[: len(module.split(".")) - node.level + (1 if is_package else 0)]
                base = ".".join([*parts, base] if base else parts)
            submodules = [f"{base}.{alias.name}" for alias in node.names if f"{base}.{alias.name}" in MODULES]
            # `from pkg import sub` imports the submodule; `from pkg import name` imports pkg itself
            names = submodules + ([base] if len(submodules) < len(node.names) else [])
        else:
            continue
        for name in names:
            if name in MODULES:
                found.add(name)
            # importing a.b.c runs a.b's __init__ first, unless the importer is inside a.b already
            parts = name.split(".")
            for depth in range(2, len(parts)):
                parent = ".".join(parts[:depth])
                if parent in MODULES and not (module + ".").startswith(parent + "."):
                    found.add(parent)
    found.discard(module)
    found.discard("safe_tracectx")  # the package's __init__ is only the public surface
    return found


def test_no_import_cycle_among_the_packages_modules() -> None:
    # the documented upward edges (UPWARD, below) are imports at call time, never at import time
    graph = {
        module: {target for target in _imports(module) if (module, _package(target)) not in UPWARD}
        for module in MODULES
        if module != "safe_tracectx"
    }
    state: dict[str, int] = {}
    cycles: list[list[str]] = []

    def visit(module: str, path: list[str]) -> None:
        state[module] = 1
        for target in sorted(graph.get(module, ())):
            if state.get(target) == 1:
                cycles.append(path[path.index(target) :] + [target] if target in path else [module, target])
            elif state.get(target) is None:
                visit(target, [*path, target])
        state[module] = 2

    for module in sorted(graph):
        if module not in state:
            visit(module, [module])
    assert not cycles, "import cycles: " + "; ".join(" -> ".join(cycle) for cycle in cycles)


def test_the_graph_sees_real_edges() -> None:
    """The cycle check above would be vacuous if the walk found no edges."""
    assert "safe_tracectx.context.blocks" in _imports("safe_tracectx.context.active_trace")
    assert "safe_tracectx.auditlog.log" in _imports("safe_tracectx.hooks.installer")
    assert "safe_tracectx.hooks.installer" not in _imports("safe_tracectx.auditlog.log")
    # the implicit import of a package's __init__ counts (how the old audit -> hooks cycle went)
    assert "safe_tracectx.auditlog" in _imports("safe_tracectx.hooks.leftovers")
    assert "safe_tracectx.auditlog" in _imports("safe_tracectx.report.ranks")  # via auditlog.combine's package


#: The layers, lowest first: a module may import its own package and the packages of lower layers only.
LAYERS: dict[str, int] = {
    "exitcodes": 0,
    "_support": 1,
    "errors": 2,
    "policy": 3,
    "context": 4,
    "traces": 5,
    "proxies": 5,
    "auditlog": 6,
    "hooks": 7,
    "sweep": 8,
    "report": 8,
    # the faces: what users call
    "cli": 9,
    "lint": 9,
    "demo": 9,
    "pytest_plugin": 9,
    "__main__": 9,
    # re-exports of moved modules, kept for one release
    "checks": 9,
    "documents": 9,
    "fingerprint": 9,
}
#: The edges between two faces (or two packages of one layer) that are allowed.
SIDEWAYS: set[tuple[str, str]] = {("cli", "lint"), ("cli", "demo"), ("__main__", "cli")}
#: Upward edges (a module, the package it reaches), each lazy and with its reason.
UPWARD: dict[tuple[str, str], str] = {
    ("safe_tracectx.auditlog.log", "report"): "AuditLog.report(), the README's one-line text report",
}


def _package(module: str) -> str:
    return module.split(".")[1]


def test_every_package_has_a_layer() -> None:
    assert {_package(m) for m in MODULES if m != "safe_tracectx"} - set(LAYERS) == set()


def test_imports_go_down_the_layers() -> None:
    wrong = []
    for module in MODULES:
        if module == "safe_tracectx":
            continue
        source = _package(module)
        for target in sorted(_imports(module)):
            into = _package(target)
            if into == source or (source, into) in SIDEWAYS or (module, into) in UPWARD:
                continue
            if LAYERS[into] >= LAYERS[source]:
                wrong.append(f"{module} -> {target} ({source} is layer {LAYERS[source]}, {into} layer {LAYERS[into]})")
    assert wrong == []


def test_lint_imports_only_the_exit_codes() -> None:
    found = {target for m in MODULES if m.startswith("safe_tracectx.lint") for target in _imports(m)}
    assert {_package(t) for t in found} - {"lint"} == {"exitcodes"}


def test_the_layer_check_sees_a_wrong_edge() -> None:
    """The layer check would pass vacuously if it missed an edge: an upward edge it must see."""
    assert "safe_tracectx.report.text" in _imports("safe_tracectx.auditlog.log")
    assert all(package in LAYERS for _, package in UPWARD)


@pytest.mark.slow
@pytest.mark.parametrize("module", [m for m in MODULES if not m.endswith("__main__")])
def test_each_module_imports_alone_in_a_fresh_interpreter(module: str) -> None:
    run = subprocess.run(
        [sys.executable, "-W", "ignore", "-c", f"import {module}"], capture_output=True, text=True, timeout=120
    )
    assert run.returncode == 0, run.stderr[-2000:]


def test_no_module_is_over_350_lines() -> None:
    sizes = {path.relative_to(PACKAGE.parent).as_posix(): len(path.read_text().splitlines()) for path in PACKAGE.rglob("*.py")}
    assert {name: n for name, n in sizes.items() if n > 350} == {}


def test_lint_imports_neither_torch_nor_thunder() -> None:
    code = "import safe_tracectx.lint, sys; assert 'torch' not in sys.modules and 'thunder' not in sys.modules"
    assert subprocess.run([sys.executable, "-c", code], timeout=60).returncode == 0


def test_the_public_audit_function_is_never_shadowed_by_a_module() -> None:
    """README's integration example, verbatim: `stc.audit()` after install/uninstall is the function."""
    code = (
        "import warnings; warnings.simplefilter('ignore')\n"
        "import safe_tracectx as stc\n"
        "stc.install('strict', audit=True)\n"
        "stc.uninstall()\n"
        "with stc.audit() as log:\n"
        "    pass\n"
        "print(type(log).__name__)\n"
    )
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert run.returncode == 0 and run.stdout.strip() == "AuditLog", run.stderr[-2000:]


def test_python_dash_m_and_version() -> None:
    run = subprocess.run([sys.executable, "-m", "safe_tracectx", "--version"], capture_output=True, text=True, timeout=60)
    from safe_tracectx import __version__

    assert run.returncode == 0 and run.stdout.strip() == f"safe-tracectx {__version__}"
    assert __version__ != "0+unknown"


def test_the_readme_layout_names_every_module() -> None:
    readme = (PACKAGE.parent / "README.md").read_text(encoding="utf-8")
    layout = readme[readme.index("## Layout") :]
    missing = [path.name for path in PACKAGE.rglob("*.py") if path.name not in layout]
    assert missing == []


def test_the_library_frames_skipped_are_the_whole_packages() -> None:
    """Call sites skip every frame of the package, wherever the module that decides it sits in the tree."""
    from safe_tracectx._support import callsite

    assert callsite._PACKAGE_DIR == str(PACKAGE) + os.sep
