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
        ["*ERROR at teardown of test_leaks_in_a_thread*",
         "E   *was never reset: it was made in thread 'leaky-worker', which no longer runs"]
    )
    assert "the test ended with 0 set_tracectx" not in result.stdout.str()


def test_a_set_left_by_an_asyncio_task_or_a_copied_context_is_a_teardown_error(pytester: pytest.Pytester) -> None:
    """Found by helper 53: on the test's own thread, which still runs, these sets were listed but passed."""
    pytester.makepyfile(
        test_contexts=HEADER
        + """
import asyncio, contextvars

def test_leaks_in_a_task():
    async def task():
        set_tracectx(TraceCtx())
    async def main():
        await asyncio.create_task(task(), name="leaky-task")
    asyncio.run(main())

def test_leaks_in_a_copied_context():
    contextvars.copy_context().run(set_tracectx, TraceCtx())

def test_balanced_in_a_task():
    async def task():
        with tracectx(TraceCtx()):
            await asyncio.sleep(0)
    asyncio.run(task())
"""
    )
    result = pytester.runpytest_subprocess("--safe-tracectx=strict", "-p", "no:cacheprovider", "-rE")
    outcomes = _outcomes(result)
    assert outcomes.get("passed") == 3 and outcomes.get("errors") == 2
    result.stdout.fnmatch_lines(["*ERROR at teardown of test_leaks_in_a_task*",
                                 "E   *was never reset: it was made in asyncio task 'leaky-task' (thread 'MainThread'), *"])
    result.stdout.fnmatch_lines(["*ERROR at teardown of test_leaks_in_a_copied_context*",
                                 "E   *was never reset: it was made in a Context thread 'MainThread' no longer runs*"])


def test_a_module_fixture_that_keeps_a_context_to_reset_its_set_in_is_not_charged_to_the_test(
    pytester: pytest.Pytester,
) -> None:
    """Found by helper 54: a set a wider-scoped fixture makes in a Context it keeps (and resets in, at its teardown)
    was charged to the first test as made in a Context that no longer runs."""
    pytester.makepyfile(
        test_kept=HEADER
        + """
import contextvars
from thunder.core.trace import reset_tracectx

@pytest.fixture(scope="module")
def kept():
    ctx = contextvars.copy_context()
    token = ctx.run(set_tracectx, TraceCtx())
    yield ctx
    ctx.run(reset_tracectx, token)

def test_one(kept):
    assert kept.run(get_tracectx) is not None

def test_two(kept):
    assert kept.run(get_tracectx) is not None
"""
    )
    result = pytester.runpytest_subprocess("--safe-tracectx=strict", "-p", "no:cacheprovider", "-rE")
    assert _outcomes(result) == {"passed": 2}, result.stdout.str()[-3000:]


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


# ---- leaks, session installs and the report path, with safe_tracectx itself in the test module ------

#: The start of a test module that uses Thunder's trace module as tt and safe_tracectx as stc.
STC_HEADER = (
    "import warnings\nwarnings.simplefilter('ignore')\nimport pytest\n"
    "import thunder.core.trace as tt\nimport safe_tracectx as stc\n"
)


def test_a_module_scoped_fixture_may_hold_a_trace_across_tests_in_strict_and_audit_modes(
    pytester: pytest.Pytester
) -> None:
    pytester.makepyfile(
        test_fixtures=STC_HEADER
        + """
T = tt.TraceCtx()

@pytest.fixture(scope="module")
def module_trace():
    with tt.tracectx(T):
        yield T

def test_one(module_trace):
    assert tt.get_tracectx() is T

def test_two(module_trace):
    assert tt.get_tracectx() is T
"""
    )
    for mode in ("strict", "audit"):
        result = pytester.runpytest_subprocess(f"--safe-tracectx={mode}", "-p", "no:cacheprovider")
        assert _outcomes(result) == {"passed": 2}, mode
        result.stdout.fnmatch_lines([f"mode {mode}: 2 tests audited*0 tests with violations"])


def test_a_test_that_leaves_a_block_or_policy_open_errors_and_the_next_test_starts_clean(
    pytester: pytest.Pytester
) -> None:
    pytester.makepyfile(
        test_managers=STC_HEADER
        + """
KEEP = []

def test_leaks_own_manager():
    def gen():
        with stc.tracectx(tt.TraceCtx()):
            yield
    g = gen(); next(g); KEEP.append(g)

def test_next_starts_clean():
    assert tt.get_tracectx() is None

def test_leaks_policy():
    stc.use_policy("lenient").__enter__()

def test_policy_is_strict_again():
    assert stc.get_policy().missing_trace == "raise"

def test_changes_the_default():
    stc.set_default_policy("lenient")

def test_default_is_back():
    assert stc.get_policy().missing_trace == "raise"
"""
    )
    result = pytester.runpytest_subprocess("--safe-tracectx=strict", "-p", "no:cacheprovider")
    assert _outcomes(result) == {"passed": 6, "errors": 3}


def test_the_strict_plugin_passes_when_a_conftest_installs_for_the_whole_session(pytester: pytest.Pytester) -> None:
    pytester.makeconftest(STC_HEADER + "def pytest_configure(config):\n    stc.install()\n\ndef pytest_unconfigure(config):\n    stc.uninstall()\n")
    pytester.makepyfile(test_a="def test_a():\n    pass\n")
    result = pytester.runpytest_subprocess("--safe-tracectx=strict", "-p", "no:cacheprovider")
    assert result.ret == 0 and _outcomes(result) == {"passed": 1}


def test_a_leak_is_charged_when_the_test_is_marked_xfail(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        test_x=STC_HEADER + "@pytest.mark.xfail\ndef test_leak_then_xfail():\n    tt.set_tracectx(tt.TraceCtx())\n    assert False\n"
    )
    result = pytester.runpytest_subprocess("--safe-tracectx=strict", "-p", "no:cacheprovider")
    assert result.ret == 1 and _outcomes(result).get("errors") == 1


def test_pytest_stops_with_a_usage_error_when_the_plugin_report_cannot_be_written(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_a="def test_a():\n    pass\n")
    result = pytester.runpytest_subprocess("--safe-tracectx=audit", "--safe-tracectx-report=/nonexistent/r.json")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*--safe-tracectx-report: cannot write /nonexistent/r.json*"])


def test_an_install_left_running_at_collection_is_said_and_ended_without_a_traceback(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_leak_at_import="""
        import safe_tracectx
        safe_tracectx.install("lenient")  # at collection, never uninstalled

        def test_a():
            pass
    """)
    result = pytester.runpytest_subprocess("--safe-tracectx=strict", "-p", "no:cacheprovider")
    assert result.ret == 0, result.stdout.str() + result.stderr.str()
    result.stdout.fnmatch_lines(["left running outside any test: <installation by install() at *test_leak_at_import.py:2*"])
    assert "Traceback" not in result.stdout.str() + result.stderr.str()
