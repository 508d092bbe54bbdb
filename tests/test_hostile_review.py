"""Regression tests for what a hostile review of the reshaped core broke (each failed before its fix)."""

from __future__ import annotations

import asyncio
import contextlib
import os
import threading
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
import thunder.core.trace as tt
from thunder.core.trace import TraceCtx, from_trace, get_tracectx

import safe_tracectx as stc
from safe_tracectx import (
    LENIENT,
    STRICT,
    Policy,
    UnbalancedContextError,
    get_policy,
    set_default_policy,
    tracectx,
    use_policy,
)
from safe_tracectx.cli import main

MakeTrace = Callable[..., TraceCtx]
HEADER = "import warnings\nwarnings.simplefilter('ignore')\nimport pytest\nimport thunder.core.trace as tt\nimport safe_tracectx as stc\n"


def _outcomes(result: pytest.RunResult) -> dict[str, int]:
    return {k: v for k, v in result.parseoutcomes().items() if k not in {"warning", "warnings"}}


def test_wider_scoped_fixtures_may_hold_a_trace_across_tests(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        test_fixtures=HEADER
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


def test_the_plugin_closes_the_packages_own_blocks_and_policies_a_test_leaves(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        test_managers=HEADER
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


def test_a_conftests_own_session_install_nests_around_nothing_it_did_not_make(pytester: pytest.Pytester) -> None:
    pytester.makeconftest(HEADER + "def pytest_configure(config):\n    stc.install()\n\ndef pytest_unconfigure(config):\n    stc.uninstall()\n")
    pytester.makepyfile(test_a="def test_a():\n    pass\n")
    result = pytester.runpytest_subprocess("--safe-tracectx=strict", "-p", "no:cacheprovider")
    assert result.ret == 0 and _outcomes(result) == {"passed": 1}


def test_a_leak_in_an_xfail_test_is_still_charged(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        test_x=HEADER + "@pytest.mark.xfail\ndef test_leak_then_xfail():\n    tt.set_tracectx(tt.TraceCtx())\n    assert False\n"
    )
    result = pytester.runpytest_subprocess("--safe-tracectx=strict", "-p", "no:cacheprovider")
    assert result.ret == 1 and _outcomes(result).get("errors") == 1


def test_an_unwritable_plugin_report_is_a_usage_error_up_front(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_a="def test_a():\n    pass\n")
    result = pytester.runpytest_subprocess("--safe-tracectx=audit", "--safe-tracectx-report=/nonexistent/r.json")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*--safe-tracectx-report: cannot write /nonexistent/r.json*"])


def test_concurrent_read_only_readers_do_not_touch_the_shared_trace(make_trace: MakeTrace) -> None:
    trace = make_trace("x")
    original = trace.names
    sibling = from_trace(trace)

    async def reader() -> None:
        with tracectx(trace, read_only=True):
            await asyncio.sleep(0)

    async def both() -> None:
        await asyncio.gather(reader(), reader())

    asyncio.run(both())
    sibling.add_name("later")
    assert trace.names is original and "later" in trace.names


def test_a_balanced_audit_in_each_of_two_threads(make_trace: MakeTrace) -> None:
    errors: list[BaseException] = []
    seen: dict[str, bool] = {}
    first_done = threading.Event()

    def worker(name: str, wait: bool) -> None:
        try:
            with stc.audit():
                if wait:
                    first_done.wait(10)
                token = tt.set_tracectx(TraceCtx())
                tt.reset_tracectx(token)
                seen[name] = stc.is_installed()
            if not wait:
                first_done.set()
        except BaseException as error:  # noqa: BLE001
            errors.append(error)

    threads = [threading.Thread(target=worker, args=("b", True)), threading.Thread(target=worker, args=("a", False))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == [] and seen == {"a": True, "b": True} and not stc.is_installed()


def test_a_set_left_by_a_thread_that_ended_is_reported_when_the_installation_ends() -> None:
    with pytest.raises(UnbalancedContextError, match="by threads that have ended were never reset.*thread leaker"):
        with stc.installed("strict"):
            thread = threading.Thread(target=lambda: tt.set_tracectx(TraceCtx()), name="leaker")
            thread.start()
            thread.join()


def test_uninstall_in_a_finally_never_replaces_a_keyboard_interrupt() -> None:
    with pytest.raises(KeyboardInterrupt) as info:
        stc.install("strict")
        try:
            tt.set_tracectx(TraceCtx())
            raise KeyboardInterrupt
        finally:
            stc.uninstall()
    assert any("never reset" in note for note in info.value.__notes__)
    assert get_tracectx() is None and not stc.is_installed()


def test_a_typo_in_the_policy_variable_never_replaces_a_keyboard_interrupt(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SAFE_TRACECTX_POLICY", "lenent")
    with pytest.raises(KeyboardInterrupt) as info:
        with tracectx(TraceCtx()):
            token = tt.set_tracectx(TraceCtx())
            del token
            raise KeyboardInterrupt
    assert any("lenent" in note for note in info.value.__notes__)


def test_a_foreign_token_reset_under_an_open_block_is_refused(make_trace: MakeTrace) -> None:
    a, b = make_trace(), make_trace()
    token = tt.set_tracectx(a)
    try:
        with stc.installed("strict"):
            with tracectx(b):
                with pytest.raises(UnbalancedContextError, match="token made before install"):
                    tt.reset_tracectx(token)
                assert get_tracectx() is b  # nothing changed under the block
    finally:
        tt.reset_tracectx(token)
    assert get_tracectx() is None


def test_the_users_default_policy_survives_the_installations_end() -> None:
    stc.install("strict")
    set_default_policy("lenient")
    stc.uninstall()
    try:
        assert get_policy() is LENIENT
    finally:
        set_default_policy(None)


def test_an_installation_is_judged_by_its_own_policy_not_a_leaked_inner_ones() -> None:
    with pytest.raises(UnbalancedContextError):
        with stc.installed("strict"):
            stc.install("lenient")
            tt.set_tracectx(TraceCtx())
    assert get_policy() is STRICT and not stc.is_installed()


def test_decorated_generators_and_coroutines_may_hold_blocks_across_yield(make_trace: MakeTrace) -> None:
    outer, inner = make_trace(), make_trace()

    @tracectx(outer)
    async def work() -> bool:
        with tracectx(inner):
            await asyncio.sleep(0)
            return get_tracectx() is inner

    @use_policy("lenient")
    def policies() -> Iterator[Policy]:
        with use_policy("strict"):
            yield get_policy()
        yield get_policy()

    assert asyncio.run(work())
    assert list(policies()) == [STRICT, LENIENT] and get_policy() is STRICT


def test_run_reports_relative_to_where_it_started_even_if_the_program_changes_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "prog.py").write_text("import os\nos.chdir('/')\n")
    monkeypatch.chdir(tmp_path)
    assert main(["run", "--json", "out.json", "prog.py"]) == 0
    assert (tmp_path / "out.json").exists() and os.getcwd() == str(tmp_path)


def test_run_refuses_unknown_options_with_its_own_usage(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["run", "--bogus", "x.py"]) == 2
    assert "usage: safe-tracectx run" in capsys.readouterr().err


def test_report_refuses_a_damaged_audit(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "a.json").write_text('{"schema": "safe-tracectx/audit"}')
    assert main(["report", str(tmp_path / "a.json")]) == 2
    assert "is a damaged safe-tracectx data file: version None" in capsys.readouterr().err


def test_a_json_path_that_cannot_be_written_is_refused_before_running(capsys: pytest.CaptureFixture[str]) -> None:
    with contextlib.suppress(FileNotFoundError):
        assert main(["run", "--json", "/proc/x.json", "x.py"]) == 2
        assert "cannot write /proc/x.json" in capsys.readouterr().err


@pytest.mark.parametrize(
    "body",
    ['{"schema":"safe-tracectx/combined"}', '{"schema":"safe-tracectx/combined","members":5}',
     '{"schema":"safe-tracectx/combined","members":[{"x":1}]}'],
)
def test_combine_refuses_a_damaged_combined_file(tmp_path: Path, capsys: pytest.CaptureFixture[str], body: str) -> None:
    (tmp_path / "a.json").write_text(body)
    assert main(["combine", str(tmp_path / "a.json"), "--output", str(tmp_path / "out.json")]) == 2
    assert "is a damaged combined file" in capsys.readouterr().err


def test_an_html_folder_that_cannot_be_made_is_a_usage_error_before_anything_runs(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "prog.py").write_text("print('ran')\n")
    assert main(["run", "--html", str(tmp_path / "prog.py" / "sub"), str(tmp_path / "prog.py")]) == 2
    captured = capsys.readouterr()
    assert "--html: cannot make the folder" in captured.err and "ran" not in captured.out


def test_combine_finds_data_files_named_with_data_file_in_a_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "prog.py").write_text("pass\n")
    monkeypatch.chdir(tmp_path)
    for rank in (0, 1):
        monkeypatch.setenv("RANK", str(rank))
        monkeypatch.setenv("WORLD_SIZE", "2")
        monkeypatch.setenv("LOCAL_RANK", str(rank))
        assert main(["run", "--data-file", "job42.rank{rank}.json", "prog.py"]) == 0
    monkeypatch.delenv("RANK")
    assert main(["combine", ".", "--output", "all.json"]) == 0
    assert "2" in capsys.readouterr().out and (tmp_path / "all.json").exists()


SWEEP_PROGRAM = """
import os, sys, warnings
warnings.simplefilter("ignore")
import torch, thunder
mode = sys.argv[1]
if mode == "broken":
    raise RuntimeError("the program is broken")
if mode == "fork":
    pid = os.fork()
try:
    thunder.jit(lambda x: x * 2)(torch.ones(2))
except Exception as error:
    if mode == "exit1":
        print("error:", error, file=sys.stderr)
        sys.exit(1)
    raise
if mode == "fork" and pid:
    os.waitpid(pid, 0)
elif mode == "fork":
    os._exit(0)
"""


@pytest.mark.parametrize(("mode", "status", "said"), [("broken", 2, "fails without any fault"), ("exit1", 0, "handled"), ("fork", 0, "propagated")])
def test_sweep_on_programs_that_fail_exit_or_fork(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], mode: str, status: int, said: str
) -> None:
    program = tmp_path / "prog.py"
    program.write_text(SWEEP_PROGRAM)
    assert main(["sweep", "--kinds", "pass", "--max", "3", str(program), mode]) == status
    captured = capsys.readouterr()
    assert said in captured.out + captured.err


def test_installations_started_and_ended_by_many_threads_at_once_put_every_original_back() -> None:
    """Found by a fresh-clone CI run: two threads starting the first installation together both patched,
    and the second took the first's hooks for the originals, so they stayed after the last uninstall."""
    originals = (tt.set_tracectx, tt.reset_tracectx)
    start = threading.Barrier(8)
    errors: list[BaseException] = []

    def worker() -> None:
        try:
            for _ in range(20):
                start.wait(10) if not start.broken else None
                with stc.audit():
                    token = tt.set_tracectx(TraceCtx())
                    tt.reset_tracectx(token)
        except threading.BrokenBarrierError:
            pass
        except BaseException as error:  # noqa: BLE001
            errors.append(error)

    threads = [threading.Thread(target=worker) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == [] and not stc.is_installed()
    assert (tt.set_tracectx, tt.reset_tracectx) == originals
