"""The pytest plugin at the edges (pytester runs): leaks with any outcome, fixtures, threads, modes, config."""

from __future__ import annotations

import json

import pytest

HEADER = """
import threading, warnings
warnings.simplefilter("ignore")
import pytest
from thunder.core.trace import TraceCtx, get_tracectx, set_tracectx, tracectx
"""


def _outcomes(result: pytest.RunResult) -> dict[str, int]:
    return {k: v for k, v in result.parseoutcomes().items() if k not in {"warning", "warnings"}}


@pytest.mark.parametrize("ending", ["raise ValueError('after the leak')", "pytest.skip('skip')", "pytest.xfail('xfail')"])
def test_a_leak_is_charged_and_cleaned_whatever_the_outcome(pytester: pytest.Pytester, ending: str) -> None:
    pytester.makepyfile(
        test_leak=HEADER
        + f"""
def test_a():
    set_tracectx(TraceCtx())
    {ending}

def test_b():
    assert get_tracectx() is None
"""
    )
    result = pytester.runpytest_subprocess("--safe-tracectx=strict", "-p", "no:cacheprovider", "-rE")
    outcomes = _outcomes(result)
    assert outcomes.get("errors") == 1 and outcomes.get("passed", 0) >= 1  # test_b passes: the state was cleaned
    result.stdout.fnmatch_lines(["*ERROR at teardown of test_a*", "E   *the test ended with 1 set_tracectx() never reset*"])


def test_a_balanced_fixture_holding_a_trace_context_is_clean(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        test_fixture=HEADER
        + """
@pytest.fixture
def active_trace():
    t = TraceCtx()
    with tracectx(t):
        yield t

def test_uses_it(active_trace):
    assert get_tracectx() is active_trace

def test_after():
    assert get_tracectx() is None
"""
    )
    result = pytester.runpytest_subprocess("--safe-tracectx=strict", "-p", "no:cacheprovider")
    assert _outcomes(result) == {"passed": 2}
    result.stdout.fnmatch_lines(["mode strict: 2 tests audited*0 tests with violations"])


def test_threads_balanced_work_is_clean_and_a_thread_that_leaks_is_named(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        test_threads=HEADER
        + """
def test_balanced_in_a_thread():
    def work():
        with tracectx(TraceCtx()):
            pass
    t = threading.Thread(target=work); t.start(); t.join()

def test_leaks_in_a_thread():
    t = threading.Thread(target=lambda: set_tracectx(TraceCtx()), name="leaky-worker")
    t.start(); t.join()
"""
    )
    result = pytester.runpytest_subprocess("--safe-tracectx=strict", "-p", "no:cacheprovider", "-rE")
    outcomes = _outcomes(result)
    assert outcomes.get("passed") == 2 and outcomes.get("errors") == 1
    result.stdout.fnmatch_lines(
        ["*ERROR at teardown of test_leaks_in_a_thread*", "E   *thread 'leaky-worker' ended with set_tracectx(*) never reset"]
    )
    assert "the test ended with 0 set_tracectx" not in result.stdout.str()


def test_lenient_warns_and_closes(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        test_lenient=HEADER
        + """
def test_a():
    set_tracectx(TraceCtx())

def test_b():
    assert get_tracectx() is None
"""
    )
    result = pytester.runpytest_subprocess("--safe-tracectx=lenient", "-p", "no:cacheprovider", "-W", "always")
    assert _outcomes(result).get("passed") == 2
    result.stdout.fnmatch_lines(["*TraceContextWarning: the test ended with 1 set_tracectx() never reset*"])


def test_the_failure_shows_the_violation_not_the_plugin(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_leak=HEADER + "\ndef test_a():\n    set_tracectx(TraceCtx())\n")
    result = pytester.runpytest_subprocess("--safe-tracectx=strict", "-p", "no:cacheprovider")
    errors = result.stdout.str().split("= ERRORS =")[1].split("= safe-tracectx =")[0]
    assert "pytest_plugin.py" not in errors and "actions.py" not in errors
    assert "test_leak.py:" in errors and "fix: reset every set_tracectx()" in errors


def test_an_installation_left_running_by_a_test_does_not_switch_the_plugin_off(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        test_installs=HEADER
        + """
import safe_tracectx as stc

def test_installs_and_uninstalls():
    stc.install("lenient")
    stc.uninstall()

def test_leaks_later():
    set_tracectx(TraceCtx())
"""
    )
    result = pytester.runpytest_subprocess("--safe-tracectx=strict", "-p", "no:cacheprovider")
    assert _outcomes(result) == {"passed": 2, "errors": 1}


def test_the_ini_option_and_the_report_file(pytester: pytest.Pytester) -> None:
    pytester.makepyprojecttoml('[tool.pytest.ini_options]\nsafe_tracectx = "audit"\n')
    pytester.makepyfile(test_leak=HEADER + "\ndef test_a():\n    set_tracectx(TraceCtx())\n")
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "--safe-tracectx-report=out.json")
    assert _outcomes(result) == {"passed": 1}
    result.stdout.fnmatch_lines(["mode audit: 1 test audited*1 test with violations"])
    document = json.loads((pytester.path / "out.json").read_text())
    assert document["schema"] == "safe-tracectx/pytest" and document["version"] == 2
    (test,) = document["tests"].values()
    assert set(test) == {"counts", "passes", "violations", "leaked_sets", "traceless"}


def test_a_bad_ini_value_is_a_usage_error(pytester: pytest.Pytester) -> None:
    pytester.makepyprojecttoml('[tool.pytest.ini_options]\nsafe_tracectx = "paranoid"\n')
    pytester.makepyfile(test_x="def test_x():\n    pass\n")
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*safe_tracectx = 'paranoid': use one of strict, lenient, audit*"])
