"""install()/uninstall(): the ContextVar guard, the naming hook and the pass wrappers, on real Thunder."""

from __future__ import annotations

import asyncio
import contextvars
import gc
import tracemalloc
from collections.abc import Iterator

import pytest
import thunder.common as thunder_common
import thunder.core.proxies as thunder_proxies
import thunder.core.transforms as thunder_transforms
import thunder.core.rematerialization as remat
import thunder.core.trace as thunder_trace
import thunder.executors.torch_compile as torch_compile
import thunder.transforms.autodiff as autodiff
from thunder.core.devices import cpu
from thunder.core.dtypes import float32
from thunder.core.proxies import TensorProxy
from thunder.core.trace import TraceCtx, get_tracectx, reset_tracectx, set_tracectx

from safe_tracectx import (
    MissingTraceError,
    TraceContextWarning,
    UnbalancedContextError,
    is_traceless,
    tracectx,
    use_policy,
)
from safe_tracectx._support import events
from safe_tracectx.hooks import (
    PASSES,
    RawBlock,
    install,
    installed,
    is_installed,
    open_blocks,
    thunder_support,
    uninstall,
)
from safe_tracectx.hooks import audit


def _originals() -> dict[str, object]:
    return {
        "trace.set_tracectx": thunder_trace.set_tracectx,
        "trace.reset_tracectx": thunder_trace.reset_tracectx,
        "common.set_tracectx": getattr(thunder_common, "set_tracectx"),  # imported by name there
        "transforms.reset_tracectx": getattr(thunder_transforms, "reset_tracectx"),
        "proxies.make_proxy_name": thunder_proxies.make_proxy_name,
        "remat.rematerialize": remat.rematerialize,
        "torch_compile.rematerialize": getattr(torch_compile, "rematerialize"),
        "autodiff.grad_transform_on_trace": autodiff.grad_transform_on_trace,
        "autodiff.split_into_forward_and_backward": autodiff.split_into_forward_and_backward,
    }


@pytest.fixture
def hooks() -> Iterator[None]:
    install()
    yield
    uninstall()


def test_install_replaces_every_seam_and_uninstall_restores_identity() -> None:
    before = _originals()
    get_before = thunder_trace.get_tracectx
    install()
    try:
        assert is_installed()
        during = _originals()
        assert all(during[key] is not before[key] for key in before), during
        assert thunder_trace.get_tracectx is get_before
        assert getattr(torch_compile, "rematerialize") is remat.rematerialize  # rebound where imported by name
        install()  # nested: the hooks stay the same objects
        assert _originals() == during
        uninstall()  # ends the inner one only
        assert is_installed() and _originals() == during
    finally:
        uninstall()
    assert not is_installed()
    assert all(_originals()[key] is before[key] for key in before)
    with pytest.raises(UnbalancedContextError, match="nothing installed"):
        uninstall()  # unbalanced: a clear error


def test_a_hooked_function_bound_under_another_name_is_hooked_and_put_back() -> None:
    """``from ... import interpret_trace as eval_trace`` (Thunder's transforms do it) before install is hooked;
    ``from ... import set_tracectx as my_set`` while installed is put back by uninstall."""
    import sys
    import types

    import thunder.core.trace_interpreter as interpreter

    user = types.ModuleType("user_module_with_aliases")
    user.__dict__["eval_trace"] = interpreter.interpret_trace
    sys.modules[user.__name__] = user
    original_set, original_eval = thunder_trace.set_tracectx, interpreter.interpret_trace
    try:
        with installed():
            assert user.__dict__["eval_trace"] is interpreter.interpret_trace is not original_eval
            assert getattr(thunder_transforms, "eval_trace") is interpreter.interpret_trace  # Thunder's own alias
            user.__dict__["my_set"] = thunder_trace.set_tracectx
            assert user.__dict__["my_set"] is not original_set
        assert user.__dict__["my_set"] is original_set
        assert user.__dict__["eval_trace"] is original_eval and getattr(thunder_transforms, "eval_trace") is original_eval
    finally:
        del sys.modules[user.__name__]


def test_installed_restores_after_an_exception_and_keeps_an_outer_install() -> None:
    before = _originals()
    with pytest.raises(KeyError):
        with installed("lenient"):
            assert is_installed()
            raise KeyError("inside")
    assert _originals() == before and not is_installed()
    with installed():
        with installed("lenient"):
            pass
        assert is_installed()  # the inner block ended only its own installation
    assert not is_installed()


def test_install_policy_is_the_default_until_uninstall() -> None:
    from safe_tracectx import LENIENT, STRICT, get_policy

    with installed("lenient"):
        assert get_policy() is LENIENT
        with use_policy("strict"):
            assert get_policy() is STRICT
    assert get_policy() is STRICT


def test_bad_install_policy_is_rejected_before_anything_changes() -> None:
    before = _originals()
    with pytest.raises(ValueError, match="not a policy preset"):
        install("paranoid")  # type: ignore[arg-type]
    assert _originals() == before and not is_installed()


def test_install_uninstall_a_thousand_times_leaks_nothing() -> None:
    before = _originals()
    install()
    uninstall()
    gc.collect()
    tracemalloc.start()
    start, _ = tracemalloc.get_traced_memory()
    for _ in range(1000):
        install()
        uninstall()
    gc.collect()
    end, _ = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    assert _originals() == before
    assert events.sinks == [] and events.proxy_sinks == []
    assert end - start < 200_000, f"grew by {end - start} bytes"


def test_the_hot_path_is_thunders_own_code(hooks: None) -> None:
    from safe_tracectx.context import TRACE_VAR

    assert thunder_trace._tracectx is TRACE_VAR  # the ContextVar is never replaced
    assert thunder_trace.get_tracectx.__module__ == "thunder.core.trace"  # nor get_tracectx
    trace = TraceCtx()
    with tracectx(trace):
        assert get_tracectx() is trace
    with thunder_trace.tracectx(trace):
        assert get_tracectx() is trace
    assert get_tracectx() is None


def test_bare_tensorproxy_strict_names_the_line_and_the_three_managers(hooks: None) -> None:
    with pytest.raises(MissingTraceError) as info:
        TensorProxy(shape=(1,), device=cpu, dtype=float32)
    message = str(info.value)
    assert "creating a TensorProxy needs an active trace" in message
    assert f"{__file__}:" in message
    for manager in ("tracectx(trace)", "scratch_trace(", "traceless()"):
        assert manager in message
    assert not isinstance(info.value, AttributeError)


def test_bare_tensorproxy_lenient_is_traceless() -> None:
    with installed("lenient"):
        proxy = TensorProxy(shape=(1,), device=cpu, dtype=float32)
    assert is_traceless(proxy) and proxy.name.startswith("t")


def test_bare_tensorproxy_warn_then_thunders_own_error() -> None:
    with installed("strict"), use_policy("strict", missing_trace="warn"):
        with pytest.warns(TraceContextWarning, match="creating a TensorProxy"):
            with pytest.raises(AttributeError, match="make_name"):
                TensorProxy(shape=(1,), device=cpu, dtype=float32)


def _pass_that_raises_before_reset(trace: TraceCtx) -> None:
    set_tracectx(trace)  # the leaked set: the report must name this line
    raise RuntimeError("the pass failed")


LEAK_LINE = _pass_that_raises_before_reset.__code__.co_firstlineno + 1


def test_a_pass_that_raises_before_reset_is_reported_with_its_set_line(hooks: None) -> None:
    outer, inner = TraceCtx(), TraceCtx()
    with pytest.raises(UnbalancedContextError) as info:
        with tracectx(outer):
            with pytest.raises(RuntimeError, match="the pass failed"):
                _pass_that_raises_before_reset(inner)
            assert get_tracectx() is inner  # leaked
    message = str(info.value)
    assert f"set_tracectx(trace" in message and f"{__file__}:{LEAK_LINE}" in message
    assert get_tracectx() is None


def test_a_top_level_leak_shows_in_open_blocks_and_the_audit(hooks: None) -> None:
    leaked = TraceCtx()
    with audit() as log:
        with pytest.raises(RuntimeError):
            _pass_that_raises_before_reset(leaked)
        blocks = open_blocks()
        assert len(blocks) == 1 and get_tracectx() is leaked
        assert isinstance(blocks[0], RawBlock)
        site = blocks[0].site
        assert site is not None
        assert (site.filename, site.lineno) == (__file__, LEAK_LINE)
        assert [(e.site.lineno if e.site else None) for e in log.leaked_sets] == [LEAK_LINE]
        reset_tracectx(blocks[0].token)
    assert get_tracectx() is None and open_blocks() == []


def test_raw_sets_out_of_order_are_reported_and_never_reactivate(hooks: None) -> None:
    a, b = TraceCtx(), TraceCtx()
    token_a = set_tracectx(a)
    token_b = set_tracectx(b)
    with pytest.raises(UnbalancedContextError, match="still open"):
        reset_tracectx(token_a)
    assert get_tracectx() is None
    reset_tracectx(token_b)  # closed with a: silent, changes nothing
    assert get_tracectx() is None


def test_a_token_from_before_install_still_resets() -> None:
    trace = TraceCtx()
    token = set_tracectx(trace)
    with installed():
        reset_tracectx(token)
    assert get_tracectx() is None


def test_thunder_support_reports_present_and_missing_entry_points() -> None:
    report = thunder_support()
    qualnames = {spec.qualname for spec in PASSES}
    assert set(report.present) | set(report.missing) == qualnames
    assert "thunder.core.rematerialization.rematerialize" in report.present
    assert "thunder.executors.torch_compile.rematerialize" in report.rebound_in
    text = str(report)
    assert "audited: thunder.core.rematerialization.rematerialize" in text
    assert report.watched == ("thunder.core.jit_ext.bind_inputs",)
    assert "watched (the tags it adds to what it is given): thunder.core.jit_ext.bind_inputs" in text
    assert "audited: thunder.core.jit_ext.bind_inputs" not in text
    for missing in report.missing:
        assert f"not in this version (skipped): {missing}" in text


def test_a_missing_entry_point_is_skipped_not_a_crash(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delattr(autodiff, "split_into_forward_and_backward")
    assert "thunder.transforms.autodiff.split_into_forward_and_backward" in thunder_support().missing
    with installed():
        assert is_installed()
    assert not hasattr(autodiff, "split_into_forward_and_backward")


def test_thunder_results_are_identical_installed_or_not() -> None:
    import torch
    import thunder

    def f(x: torch.Tensor) -> torch.Tensor:
        return torch.nn.functional.gelu(x @ x.T).sum(0)

    x = torch.randn(5, 5)
    plain = thunder.jit(f)(x)
    with installed("strict"):
        hooked = thunder.jit(f)(x)
    assert torch.equal(plain, hooked)


def test_a_set_made_while_installed_can_be_reset_after_uninstall() -> None:
    """Found by the state machine: a suspended Thunder tracectx generator finalized after uninstall()."""
    trace = TraceCtx()
    install()
    manager = thunder_trace.tracectx(trace)
    manager.__enter__()
    token_set_while_installed = set_tracectx(TraceCtx())
    assert type(token_set_while_installed).__name__ == "Token"  # a real token, not a wrapper
    reset_tracectx(token_set_while_installed)
    with pytest.raises(UnbalancedContextError, match="made under install\\(\\) never reset"):
        uninstall()  # the installation ends with the manager's set still open: reported and closed
    assert get_tracectx() is None and not is_installed()
    # The closed set's token is spent: its late reset cannot re-activate anything (Python refuses it).
    with pytest.raises(RuntimeError, match="already been used"):
        manager.__exit__(None, None, None)
    assert get_tracectx() is None


def test_guarded_sets_work_with_unhashable_tokens(hooks: None) -> None:
    """Found by the state machine: tokens are not hashable, the guard's table is keyed by id()."""
    from safe_tracectx.hooks.guard import raw_block_of

    tokens = [set_tracectx(TraceCtx()) for _ in range(3)]
    blocks = [raw_block_of(token) for token in tokens]
    assert all(isinstance(block, RawBlock) for block in blocks)
    for token in reversed(tokens):
        reset_tracectx(token)
    assert get_tracectx() is None and [raw_block_of(t) for t in tokens] == [None, None, None]


# ---- installations across threads, nested installations, leaks at the end and BaseExceptions --------

import contextlib  # noqa: E402
import sys  # noqa: E402
import threading  # noqa: E402
from collections.abc import Callable, Generator  # noqa: E402
from pathlib import Path  # noqa: E402

import thunder.core.trace as tt  # noqa: E402
from thunder.core.trace import tracectx as thunder_tracectx  # noqa: E402

import safe_tracectx as stc  # noqa: E402
from safe_tracectx import LENIENT, STRICT, get_policy, set_default_policy  # noqa: E402
from safe_tracectx.hooks import installed_audit_log  # noqa: E402

MakeTrace = Callable[..., TraceCtx]


def _capture(target: Callable[[], None], errors: list[BaseException]) -> None:
    try:
        target()
    except BaseException as error:  # noqa: BLE001
        errors.append(error)


def test_each_thread_stays_installed_until_its_own_audit_ends_when_two_threads_overlap(make_trace: MakeTrace) -> None:
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
    with pytest.raises(UnbalancedContextError, match="that no longer run were never reset.*in thread 'leaker'"):
        with stc.installed("strict"):
            thread = threading.Thread(target=lambda: tt.set_tracectx(TraceCtx()), name="leaker")
            thread.start()
            thread.join()


async def _sets(trace: TraceCtx) -> None:
    tt.set_tracectx(trace)


def test_a_set_left_by_an_asyncio_task_or_a_copied_context_is_reported_when_the_installation_ends() -> None:
    """Found by helper 53: on a thread that still runs, a task's or a copied Context's set was never counted."""
    async def main() -> None:
        await asyncio.create_task(_sets(TraceCtx()), name="leaky-task")

    with pytest.raises(UnbalancedContextError, match=r"in asyncio task 'leaky-task' \(thread 'MainThread'\)"):
        with stc.installed("strict"):
            asyncio.run(main())
    with pytest.raises(UnbalancedContextError, match=r"in a Context thread 'MainThread' no longer runs \(a copy_context"):
        with stc.installed("strict"):
            contextvars.copy_context().run(tt.set_tracectx, TraceCtx())
    assert tt.get_tracectx() is None


def test_a_task_still_running_or_a_balanced_context_is_not_reported() -> None:
    """A task that has not ended may still reset its set (as a running thread may)."""
    async def main() -> None:
        started, finish = asyncio.Event(), asyncio.Event()

        async def balanced() -> None:
            token = tt.set_tracectx(TraceCtx())
            started.set()
            await finish.wait()
            tt.reset_tracectx(token)

        task = asyncio.create_task(balanced())
        await started.wait()
        with stc.installed("strict"):  # ends while the task is inside its set: no report
            pass
        finish.set()
        await task

    with stc.installed("strict"):
        asyncio.run(main())
        contextvars.copy_context().run(lambda: tt.reset_tracectx(tt.set_tracectx(TraceCtx())))


def test_every_original_is_put_back_when_many_threads_start_and_end_installations_at_once() -> None:
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


def test_a_thread_inside_thunders_tracectx_restores_its_traces_when_another_thread_uninstalls(
    make_trace: MakeTrace
) -> None:
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


def test_nested_installations_each_keep_their_policy_and_audit() -> None:
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


def test_uninstall_is_a_clear_error_when_nothing_is_installed_or_only_installed_is_running() -> None:
    with pytest.raises(UnbalancedContextError, match="nothing installed"):
        uninstall()
    with installed():
        with pytest.raises(UnbalancedContextError, match="no matching install\\(\\).*installed\\(\\)"):
            uninstall()
        assert is_installed()
    assert not is_installed()


def test_an_installation_is_judged_by_its_own_policy_when_an_inner_install_is_left_running() -> None:
    with pytest.raises(UnbalancedContextError):
        with stc.installed("strict"):
            stc.install("lenient")
            tt.set_tracectx(TraceCtx())
    assert get_policy() is STRICT and not stc.is_installed()


def test_a_default_policy_set_while_installed_stays_after_uninstall() -> None:
    stc.install("strict")
    set_default_policy("lenient")
    stc.uninstall()
    try:
        assert get_policy() is LENIENT
    finally:
        set_default_policy(None)


def test_a_module_imported_while_installed_gets_the_originals_back_at_uninstall(tmp_path: Path) -> None:
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


@pytest.mark.parametrize("how", ["install", "installed", "audit"])
def test_a_set_never_reset_is_reported_with_its_line_when_the_installation_ends(
    make_trace: MakeTrace, how: str
) -> None:
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


def test_a_keyboard_interrupt_stays_and_carries_the_leak_as_a_note_when_uninstall_runs_in_a_finally() -> None:
    with pytest.raises(KeyboardInterrupt) as info:
        stc.install("strict")
        try:
            tt.set_tracectx(TraceCtx())
            raise KeyboardInterrupt
        finally:
            stc.uninstall()
    assert any("never reset" in note for note in info.value.__notes__)
    assert get_tracectx() is None and not stc.is_installed()


def test_resetting_a_token_from_before_install_under_an_open_block_is_refused_and_changes_nothing(
    make_trace: MakeTrace
) -> None:
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


def test_a_raw_token_reset_twice_is_reported_and_reactivates_nothing(make_trace: MakeTrace) -> None:
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


def test_a_generator_finalized_after_uninstall_never_reactivates_an_ended_trace(make_trace: MakeTrace) -> None:
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


def test_a_late_thunder_reset_cannot_reactivate_an_ended_block_when_installed(make_trace: MakeTrace) -> None:
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
