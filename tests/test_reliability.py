"""One regression test per case of the reliability review: threads, Contexts, generators, nested installs, BaseExceptions.

Each test failed on the code before the fix (the case number is in its name).
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import sys
import threading
import types
import warnings
from collections.abc import Callable, Generator, Iterator
from pathlib import Path

import pytest
import thunder.core.trace as thunder_trace
from thunder.core.devices import cpu
from thunder.core.dtypes import float32
from thunder.core.proxies import TensorProxy
from thunder.core.trace import TraceCtx, from_trace, get_tracectx, reset_tracectx, set_tracectx
from thunder.core.trace import tracectx as thunder_tracectx

import safe_tracectx as stc
from safe_tracectx import (
    LENIENT,
    STRICT,
    ReadOnlyTraceError,
    TraceContextWarning,
    UnbalancedContextError,
    get_policy,
    scratch_trace,
    tracectx,
    use_policy,
)
from safe_tracectx.cli import main
from safe_tracectx.hooks import audit, install, installed, installed_audit_log, is_installed, uninstall
from safe_tracectx.proxies import fresh_name, new_tensor_proxy, rename
from safe_tracectx.traces.checks import check_trace

MakeTrace = Callable[..., TraceCtx]


def _in_thread(target: Callable[[], None]) -> list[BaseException]:
    errors: list[BaseException] = []

    def run() -> None:
        try:
            target()
        except BaseException as error:  # noqa: BLE001 - collected for the assertion
            errors.append(error)

    thread = threading.Thread(target=run)
    thread.start()
    thread.join()
    return errors


# 1 -------------------------------------------------------------------------------------------


def test_case01_exit_from_the_wrong_thread_changes_nothing_and_the_owner_still_exits(make_trace: MakeTrace) -> None:
    a = make_trace()
    manager = tracectx(a)
    manager.__enter__()
    errors = _in_thread(lambda: manager.__exit__(None, None, None))
    assert len(errors) == 1 and "another thread or Context" in str(errors[0])
    assert get_tracectx() is a
    manager.__exit__(None, None, None)  # no "exited a second time"
    assert get_tracectx() is None


# 2 -------------------------------------------------------------------------------------------


def test_case02_installations_nest_each_with_its_policy_and_audit() -> None:
    install("strict")
    try:
        with installed("lenient") as inner:
            assert get_policy() is LENIENT and inner.policy is LENIENT
        assert get_policy() is STRICT and is_installed()
        install(audit=True)
        assert installed_audit_log() is not None
        uninstall()
        assert installed_audit_log() is None and is_installed()
    finally:
        uninstall()
    assert not is_installed()


def test_case02_uninstall_without_install_is_a_clear_error_and_owned_installations_are_not_removed() -> None:
    with pytest.raises(UnbalancedContextError, match="nothing installed"):
        uninstall()
    with installed():
        with pytest.raises(UnbalancedContextError, match="no matching install\\(\\).*installed\\(\\)"):
            uninstall()
        assert is_installed()
    assert not is_installed()


def test_case02_a_program_that_installs_and_uninstalls_under_run_keeps_its_report_and_status(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    program = tmp_path / "program.py"
    program.write_text(
        "import sys, safe_tracectx as stc\n"
        "stc.install('strict', audit=True)\n"
        "stc.uninstall()\n"
        "sys.exit(3)\n"
    )
    assert main(["run", str(program)]) == 3
    out = capsys.readouterr().out
    assert "safe-tracectx audit report" in out and "Violations (0)" in out


def test_case02_an_installation_left_running_by_the_program_is_ended_by_run_and_reported(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    program = tmp_path / "program.py"
    program.write_text("import safe_tracectx as stc\nstc.install('lenient')\n")
    assert main(["run", "--fail-on-violation", str(program)]) == 1
    out = capsys.readouterr().out
    assert "was still running when" in out and not is_installed()


# 3 -------------------------------------------------------------------------------------------


def test_case03_uninstall_while_another_thread_is_inside_thunders_tracectx(make_trace: MakeTrace) -> None:
    a, g = make_trace(), make_trace()
    inside, uninstalled = threading.Event(), threading.Event()
    seen: list[object] = []

    def worker() -> None:
        with tracectx(a):
            with thunder_tracectx(g):  # a guarded set, made while installed
                inside.set()
                uninstalled.wait(10)
            seen.append(get_tracectx())
        seen.append(get_tracectx())

    install()
    thread = threading.Thread(target=worker)
    errors: list[BaseException] = []
    thread.run = lambda: _capture(worker, errors)  # type: ignore[method-assign]
    thread.start()
    inside.wait(10)
    uninstall()  # the thread's set is in its own Context: not this installation's leak here
    uninstalled.set()
    thread.join()
    assert errors == [] and seen == [a, None]


def _capture(target: Callable[[], None], errors: list[BaseException]) -> None:
    try:
        target()
    except BaseException as error:  # noqa: BLE001
        errors.append(error)


def test_case03_a_generator_finalized_after_uninstall_never_reactivates_an_ended_trace(make_trace: MakeTrace) -> None:
    a, g = make_trace(), make_trace()

    def suspended() -> Generator[None, None, None]:
        with thunder_tracectx(g):
            yield

    install()
    with use_policy("strict", unbalanced="ignore"):
        with tracectx(a):
            gen = suspended()
            next(gen)
        assert get_tracectx() is None
    uninstall()
    with contextlib.suppress(RuntimeError):  # the spent token: Python refuses it instead of re-activating `a`
        gen.close()
    assert get_tracectx() is None


# 4 -------------------------------------------------------------------------------------------


def test_case04_modules_imported_while_installed_get_the_originals_back(tmp_path: Path) -> None:
    original_set, original_reset = thunder_trace.set_tracectx, thunder_trace.reset_tracectx
    (tmp_path / "late_user_module.py").write_text("from thunder.core.trace import set_tracectx, reset_tracectx\n")
    sys.path.insert(0, str(tmp_path))
    try:
        with installed():
            import late_user_module  # type: ignore[import-not-found]

            assert late_user_module.set_tracectx is not original_set
        assert late_user_module.set_tracectx is original_set
        assert late_user_module.reset_tracectx is original_reset
    finally:
        sys.path.remove(str(tmp_path))
        sys.modules.pop("late_user_module", None)


# 5 -------------------------------------------------------------------------------------------


@pytest.mark.parametrize("exception", [KeyboardInterrupt, SystemExit, GeneratorExit])
def test_case05_a_policy_error_never_replaces_a_base_exception(make_trace: MakeTrace, exception: type) -> None:
    trace = make_trace()
    with pytest.raises(exception) as info:
        with tracectx(trace, read_only=True):
            trace.make_name()
            raise exception()
    assert any("ReadOnlyTraceError" in note or "read-only" in note for note in getattr(info.value, "__notes__", []))
    assert trace.names == set() and get_tracectx() is None


def test_case05_sys_exit_zero_through_an_unbalanced_exit_stays_sys_exit(make_trace: MakeTrace) -> None:
    a, b = make_trace(), make_trace()
    outer = tracectx(a)
    outer.__enter__()
    tracectx(b).__enter__()
    with pytest.raises(SystemExit) as info:
        try:
            raise SystemExit(0)
        finally:
            outer.__exit__(SystemExit, SystemExit(0), None)
    assert info.value.code == 0 and get_tracectx() is None


# 6 -------------------------------------------------------------------------------------------


def test_case06_decorated_generators_see_the_context_only_while_running(make_trace: MakeTrace) -> None:
    trace = make_trace()

    @tracectx(trace)
    def steps() -> Iterator[bool]:
        yield get_tracectx() is trace
        yield get_tracectx() is trace

    @use_policy("lenient")
    def policies() -> Iterator[bool]:
        yield get_policy() is LENIENT

    @scratch_trace(trace)
    def scratch() -> Iterator[bool]:
        yield type(get_tracectx()).__name__ == "ScratchTrace"

    it = steps()
    assert next(it) and get_tracectx() is None and next(it)
    assert list(policies()) == [True] and get_policy() is STRICT
    assert list(scratch()) == [True] and get_tracectx() is None


def test_case06_decorated_coroutines_see_the_context_across_awaits(make_trace: MakeTrace) -> None:
    trace = make_trace()

    @tracectx(trace)
    async def body() -> list[bool]:
        seen = [get_tracectx() is trace]
        await asyncio.sleep(0)
        seen.append(get_tracectx() is trace)
        return seen

    async def main_() -> tuple[list[bool], object]:
        task = asyncio.ensure_future(body())
        await asyncio.sleep(0)
        between = get_tracectx()
        return await task, between

    seen, between = asyncio.run(main_())
    assert seen == [True, True] and between is None


def test_case06_async_generators_are_refused_at_decoration() -> None:
    async def agen() -> object:  # pragma: no cover - never run
        yield 1

    with pytest.raises(TypeError, match="cannot decorate the async generator"):
        tracectx(None)(agen)


# 7 -------------------------------------------------------------------------------------------


def test_case07_a_raw_token_reset_twice_is_reported_and_reactivates_nothing(make_trace: MakeTrace) -> None:
    a, b = make_trace(), make_trace()
    with installed():
        with use_policy("strict", unbalanced="ignore"):
            with tracectx(a):
                token = set_tracectx(b)
            reset_tracectx(token)
        assert get_tracectx() is None
        with pytest.raises(UnbalancedContextError, match="already reset"):
            reset_tracectx(token)
        assert get_tracectx() is None


# 8 -------------------------------------------------------------------------------------------


def test_case08_a_copied_context_that_inherited_an_ended_block_restores_what_it_saw(make_trace: MakeTrace) -> None:
    a, b = make_trace(), make_trace()
    with tracectx(a):
        copied = contextvars.copy_context()

    def inside() -> object:
        with tracectx(b):
            pass
        return get_tracectx()

    assert copied.run(inside) is a  # what was active at B's enter, as Thunder's own tracectx does


# 9 -------------------------------------------------------------------------------------------


def test_case09_read_only_restore_leaves_traces_made_inside_intact(make_trace: MakeTrace) -> None:
    trace = make_trace("x")
    with use_policy("strict", read_only="ignore"):
        with tracectx(trace, read_only=True):
            new = from_trace(trace)
            with tracectx(new):
                TensorProxy("y", shape=(1,), device=cpu, dtype=float32)
    assert trace.names == {"x"} and "y" in new.names
    assert [v.kind for v in check_trace(new)] == []


# 10 ------------------------------------------------------------------------------------------


def test_case10_an_orphaned_read_only_blocks_late_exit_changes_nothing(make_trace: MakeTrace) -> None:
    a, b = make_trace(), make_trace("keep")
    outer, inner = tracectx(a), tracectx(b, read_only=True)
    with use_policy("strict", unbalanced="ignore"):
        outer.__enter__()
        inner.__enter__()
        outer.__exit__(None, None, None)  # closes inner with it
    b.names.discard("keep")
    inner.__exit__(None, None, None)
    assert b.names == set() and get_tracectx() is None


# 11 ------------------------------------------------------------------------------------------


def test_case11_use_policy_follows_the_block_rules() -> None:
    first, second = use_policy("lenient"), use_policy("strict", missing_trace="warn")
    first.__enter__()
    second.__enter__()
    with pytest.raises(UnbalancedContextError, match="still open"):  # judged by the policy in force after it
        first.__exit__(None, None, None)
    second.__exit__(None, None, None)  # silent, and re-activates nothing
    assert get_policy() is STRICT

    third = use_policy("lenient")
    third.__enter__()
    with pytest.warns(TraceContextWarning, match="another thread or Context"):  # lenient is in force there
        contextvars.copy_context().run(third.__exit__, None, None, None)
    assert get_policy() is LENIENT
    third.__exit__(None, None, None)  # the owner can still exit
    assert get_policy() is STRICT


# 12 ------------------------------------------------------------------------------------------


def test_case12_an_enter_that_raises_changes_nothing() -> None:
    broken = TraceCtx()
    broken.names = None  # type: ignore[assignment]
    with pytest.raises(TypeError):
        tracectx(broken, read_only=True).__enter__()
    assert get_tracectx() is None


# 13 ------------------------------------------------------------------------------------------


@pytest.mark.parametrize("how", ["install", "installed", "audit"])
def test_case13_a_set_never_reset_is_reported_when_the_installation_ends(make_trace: MakeTrace, how: str) -> None:
    trace = make_trace()
    line = 0
    with pytest.raises(UnbalancedContextError, match="never reset") as info:
        if how == "install":
            install("strict")
            line = sys._getframe().f_lineno + 1
            set_tracectx(trace)
            uninstall()
        else:
            with installed("strict") if how == "installed" else audit():
                line = sys._getframe().f_lineno + 1
                set_tracectx(trace)
    assert f"{__file__}:{line}" in str(info.value)
    assert get_tracectx() is None and not is_installed()


# 14 ------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("call", "error", "message"),
    [
        (lambda t: new_tensor_proxy(trace=t, shape=(-3,), device="cpu", dtype="float32"), ValueError, "non-negative"),
        (lambda t: new_tensor_proxy(trace=t, shape=(2,), device="bogus", dtype="float32"), ValueError, "not a device"),
        (lambda t: new_tensor_proxy(trace=t, shape=(2,), device="cpu", dtype="float99"), ValueError, "not a dtype"),
        (lambda t: rename(fresh_proxy(t), "", trace=t), ValueError, "not a valid proxy name"),
        (lambda t: rename(fresh_proxy(t), "has space", trace=t), ValueError, "not a valid proxy name"),
        (lambda t: rename(fresh_proxy(t), "def", trace=t), ValueError, "not a valid proxy name"),
        (lambda t: fresh_name(t, prefix=5), TypeError, "prefix as str"),  # type: ignore[arg-type]
    ],
)
def test_case14_typed_wrappers_refuse_bad_input_and_register_nothing(
    call: Callable[[TraceCtx], object], error: type, message: str
) -> None:
    trace = TraceCtx()
    with pytest.raises(error, match=message):
        call(trace)
    assert trace.names - {"kept"} == set()


def fresh_proxy(trace: TraceCtx) -> TensorProxy:
    with tracectx(trace):
        proxy = TensorProxy("kept", shape=(1,), device=cpu, dtype=float32)
    return proxy


# 15 ------------------------------------------------------------------------------------------


def test_case15_with_install_a_late_thunder_reset_cannot_reactivate_an_ended_block(make_trace: MakeTrace) -> None:
    """Without install() Thunder's own reset is a plain ContextVar reset (README: which invariants need install())."""
    a, g = make_trace(), make_trace()

    def suspended() -> Generator[None, None, None]:
        with thunder_tracectx(g):
            yield

    with installed():
        with use_policy("strict", unbalanced="ignore"):
            with tracectx(a):
                gen = suspended()
                next(gen)
            gen.close()  # while installed: the guarded reset of an orphaned set is silent
        assert get_tracectx() is None

    gen2 = suspended()
    with use_policy("strict", unbalanced="ignore"):
        with tracectx(a):
            next(gen2)
    gen2.close()
    assert get_tracectx() is a  # not installed: what the README says install() is for
    reset_tracectx(thunder_trace._tracectx.set(None))  # tidy up for the fixture
    thunder_trace._tracectx.set(None)
