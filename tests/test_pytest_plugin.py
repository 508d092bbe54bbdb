"""The pytest plugin, run in fresh pytest processes (pytester): strict, audit, the fixture, the report, xdist."""

from __future__ import annotations

import json

import pytest

SEEDED = """
import warnings
warnings.simplefilter("ignore")
from thunder.core.trace import TraceCtx, set_tracectx, reset_tracectx, get_tracectx

def test_clean():
    token = set_tracectx(TraceCtx())
    reset_tracectx(token)

def test_leaks_a_set():
    set_tracectx(TraceCtx())  # never reset

def test_after_the_leak():
    pass
"""

FIXTURE = """
import warnings
warnings.simplefilter("ignore")
from thunder.core.devices import cpu
from thunder.core.dtypes import float32
from thunder.core.proxies import TensorProxy
from thunder.core.trace import TraceCtx
from safe_tracectx import tracectx

def test_fixture(trace_audit):
    with tracectx(TraceCtx()):
        TensorProxy(shape=(1,), device=cpu, dtype=float32)
    created = [e for e in trace_audit.events if e.kind == "proxy_created"]
    assert len(created) == 1 and created[0].site.function == "test_fixture"
"""

LEAK_LINE = SEEDED.lstrip("\n").splitlines().index("    set_tracectx(TraceCtx())  # never reset") + 1

INACTIVE = """
from safe_tracectx.hooks import is_installed

def test_inactive():
    assert not is_installed()
"""


def _outcomes(result: pytest.RunResult) -> dict[str, int]:
    """passed/failed/... counts (Thunder's import warning about transformer_engine is left out)."""
    return {k: v for k, v in result.parseoutcomes().items() if k not in {"warning", "warnings"}}


def test_strict_fails_the_test_that_leaks_with_the_violations_message(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_seeded=SEEDED)
    result = pytester.runpytest_subprocess("--safe-tracectx=strict", "-rfE", "-p", "no:cacheprovider")
    outcomes = _outcomes(result)
    # Checked after teardown (a balanced fixture is clean), so the leak is the leaking test's error at teardown.
    assert outcomes.get("passed") == 3 and outcomes.get("errors") == 1
    result.stdout.fnmatch_lines(
        [f"E *.UnbalancedContextError: the test ended with 1 set_tracectx() never reset (closed now): *test_seeded.py:{LEAK_LINE} in test_leaks_a_set"]
    )
    result.stdout.fnmatch_lines(["ERROR test_seeded.py::test_leaks_a_set - *UnbalancedCont*"])
    result.stdout.fnmatch_lines(
        [
            "*= safe-tracectx =*",
            "mode strict: 3 tests audited*1 test with violations",
            "test_seeded.py::test_leaks_a_set",
            "    UnbalancedContextError [[]raise] the test ended with 1 set_tracectx() never reset*",
            f"*never reset: set_tracectx(trace*test_seeded.py:{LEAK_LINE}",
        ]
    )


def test_audit_mode_fails_nothing_and_reports_everything(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_seeded=SEEDED)
    result = pytester.runpytest_subprocess("--safe-tracectx=audit", "--safe-tracectx-report=report.json", "-p", "no:cacheprovider")
    assert _outcomes(result) == {"passed": 3}
    result.stdout.fnmatch_lines(
        ["mode audit: 3 tests audited*1 test with violations", f"*never reset*test_seeded.py:{LEAK_LINE}", "report written to report.json"]
    )
    report = json.loads((pytester.path / "report.json").read_text())
    assert report["schema"] == "safe-tracectx/pytest" and report["mode"] == "audit"
    tests = report["tests"]
    assert set(tests) == {f"test_seeded.py::{name}" for name in ("test_clean", "test_leaks_a_set", "test_after_the_leak")}
    assert tests["test_seeded.py::test_clean"]["counts"] == {"trace_reset": 1, "trace_set": 1}
    assert tests["test_seeded.py::test_clean"]["leaked_sets"] == []
    (leak,) = tests["test_seeded.py::test_leaks_a_set"]["leaked_sets"]
    assert leak["site"]["line"] == LEAK_LINE and leak["site"]["function"] == "test_leaks_a_set"
    assert tests["test_seeded.py::test_after_the_leak"]["leaked_sets"] == []


def test_the_trace_audit_fixture_with_and_without_the_plugin(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_fixture=FIXTURE)
    assert _outcomes(pytester.runpytest_subprocess("-p", "no:cacheprovider")) == {"passed": 1}
    assert _outcomes(pytester.runpytest_subprocess("--safe-tracectx=strict", "-p", "no:cacheprovider")) == {"passed": 1}


def test_inactive_unless_asked(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_inactive=INACTIVE)
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider")
    assert _outcomes(result) == {"passed": 1}
    assert "= safe-tracectx =" not in result.stdout.str()


@pytest.mark.parametrize("mode", [None, "strict", "audit"])
def test_without_xdist_the_plugin_loads_and_runs(pytester: pytest.Pytester, mode: str | None) -> None:
    # `-p no:xdist` is an environment without pytest-xdist: its hooks are unknown there, and a plugin
    # implementing one without optionalhook=True made pytest stop with PluginValidationError.
    pytester.makepyfile(test_inactive=INACTIVE if mode is None else SEEDED)
    options = [] if mode is None else [f"--safe-tracectx={mode}"]
    result = pytester.runpytest_subprocess("-p", "no:xdist", "-p", "no:cacheprovider", *options)
    assert "PluginValidationError" not in result.stdout.str() + result.stderr.str()
    expected = {"passed": 1} if mode is None else {"passed": 3} if mode == "audit" else {"passed": 3, "errors": 1}
    assert _outcomes(result) == expected


def test_xdist_workers_audit_and_the_report_is_merged(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_seeded=SEEDED, test_fixture=FIXTURE)
    result = pytester.runpytest_subprocess(
        "-n", "2", "--safe-tracectx=audit", "--safe-tracectx-report=merged.json", "-p", "no:cacheprovider"
    )
    assert _outcomes(result) == {"passed": 4}
    tests = json.loads((pytester.path / "merged.json").read_text())["tests"]
    assert len(tests) == 4 and "test_fixture.py::test_fixture" in tests
    result.stdout.fnmatch_lines(["mode audit: 4 tests audited*1 test with violations"])


BROKEN_TRANSFORM = """
import pytest, torch, thunder
from thunder.core.trace import from_trace

class Broken(thunder.Transform):
    def transform_traces_pre_prologue(self, prologue, computation, epilogue, **kwargs):
        new = from_trace(computation)
        new.bound_symbols = computation.bound_symbols[:]
        del new.bound_symbols[2]  # c = a + b: c is then used before any definition
        return prologue, new, epilogue

def fn(a, b):
    c = a + b
    return 2 * c

def test_the_broken_trace_fails_as_thunder_makes_it_fail():
    with pytest.raises(UnboundLocalError) as info:
        thunder.jit(fn, transforms=[Broken()], executors=())(torch.ones(2), torch.ones(2))
    print("RAISED", type(info.value).__name__)
"""


def test_one_check_gets_its_own_action_and_a_bad_one_is_refused(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_broken=BROKEN_TRANSFORM)
    strict = pytester.runpytest_subprocess("-p", "no:cacheprovider", "-s", "--safe-tracectx=strict")
    assert _outcomes(strict) == {"passed": 1}
    strict.stdout.fnmatch_lines(["*RAISED UseBeforeDefinitionError*"])  # ours, first, naming the pass
    warned = pytester.runpytest_subprocess(
        "-p", "no:cacheprovider", "-s", "--safe-tracectx=strict", "--safe-tracectx-check", "use-before-definition=warn"
    )
    assert _outcomes(warned) == {"passed": 1}
    warned.stdout.fnmatch_lines(["*RAISED UnboundLocalError*"])  # Thunder's own failure, as plain
    typo = pytester.runpytest_subprocess("--safe-tracectx=strict", "--safe-tracectx-check", "use-before-defintion=warn")
    assert typo.ret == pytest.ExitCode.USAGE_ERROR
    typo.stderr.fnmatch_lines(["*'use-before-defintion' is not a trace check; use one of: use-before-definition*"])
    alone = pytester.runpytest_subprocess("--safe-tracectx-check", "defined-twice=warn")
    assert alone.ret == pytest.ExitCode.USAGE_ERROR
    alone.stderr.fnmatch_lines(["*--safe-tracectx-check sets a check's action within a mode*"])
