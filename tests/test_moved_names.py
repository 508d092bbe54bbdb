"""The names of the modules that became packages (``auditlog``, ``report``, ``sweep``) still import from their old
place for the 0.2 release, with a DeprecationWarning naming the new one."""

from __future__ import annotations

import importlib
import subprocess
import sys

import pytest

MOVED = [
    ("safe_tracectx.auditlog", "AuditLog", "safe_tracectx.auditlog.log"),
    ("safe_tracectx.auditlog", "JSON_SCHEMA", "safe_tracectx.auditlog.log"),
    ("safe_tracectx.report", "render_text", "safe_tracectx.report.text"),
    ("safe_tracectx.report", "site_text", "safe_tracectx.auditlog.documents"),
    ("safe_tracectx.sweep", "sweep", "safe_tracectx.sweep.runner"),
    ("safe_tracectx.sweep", "Finding", "safe_tracectx.sweep.findings"),
]


@pytest.mark.parametrize(("old", "name", "new"), MOVED)
def test_an_old_name_imports_from_its_old_place_with_a_deprecation_warning(old: str, name: str, new: str) -> None:
    package = importlib.import_module(old)
    with pytest.warns(DeprecationWarning, match=rf"{old}\.{name} moved to {new}\.{name}; import it from there"):
        value = getattr(package, name)
    assert value is getattr(importlib.import_module(new), name)


def test_the_old_import_of_auditlog_runs_and_warns_at_the_users_line() -> None:
    code = "from safe_tracectx.auditlog import AuditLog\nprint(AuditLog().to_dict()['schema'])\n"
    done = subprocess.run(
        [sys.executable, "-W", "always::DeprecationWarning", "-c", code], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout == "safe-tracectx/audit\n"
    assert "<string>:1: DeprecationWarning: safe_tracectx.auditlog.AuditLog moved to" in done.stderr


def test_a_name_that_never_was_there_is_still_an_attribute_error() -> None:
    package = importlib.import_module("safe_tracectx.report")
    with pytest.raises(AttributeError, match="module 'safe_tracectx.report' has no attribute 'nothing'"):
        package.nothing  # noqa: B018
    with pytest.raises(ImportError, match="cannot import name 'nothing'"):
        exec("from safe_tracectx.auditlog import nothing", {})


@pytest.mark.parametrize("old", sorted({old for old, _, _ in MOVED}))
def test_a_star_import_of_an_old_module_still_brings_its_names_with_the_warning(old: str) -> None:
    package = importlib.import_module(old)
    namespace: dict[str, object] = {}
    with pytest.warns(DeprecationWarning, match=rf"{old}\.\w+ moved to "):
        exec(f"from {old} import *", namespace)
    for package_name, name, new in MOVED:
        if package_name == old:
            assert namespace[name] is getattr(importlib.import_module(new), name)
    assert set(package._MOVED) <= set(namespace)
