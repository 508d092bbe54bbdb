"""tracectx: nesting, exceptions, decorator use, and every kind of unbalanced exit."""

from __future__ import annotations

import contextlib
import contextvars
import logging
import threading
from collections.abc import Callable, Generator, Iterator
from typing import Any

import pytest
from thunder.core.trace import TraceCtx, get_tracectx, reset_tracectx, set_tracectx
from thunder.core.trace import tracectx as thunder_tracectx

from safe_tracectx import (
    TraceContextWarning,
    UnbalancedContextError,
    current_trace,
    scratch_trace,
    traceless,
    tracectx,
    use_policy,
)
from safe_tracectx.context.blocks import open_blocks
from safe_tracectx.policy import Action

MakeTrace = Callable[..., TraceCtx]


def test_makes_the_trace_active_for_thunder_and_restores_none(make_trace: MakeTrace) -> None:
    trace = make_trace()
    with tracectx(trace) as entered:
        assert entered is trace
        assert get_tracectx() is trace
        assert current_trace() is trace
    assert get_tracectx() is None


def test_nesting_restores_each_outer_trace(make_trace: MakeTrace) -> None:
    a, b, c = make_trace(), make_trace(), make_trace()
    with tracectx(a):
        with tracectx(b):
            with tracectx(c):
                assert get_tracectx() is c
            assert get_tracectx() is b
        assert get_tracectx() is a


def test_explicit_none_hides_the_outer_trace(make_trace: MakeTrace) -> None:
    outer = make_trace()
    with tracectx(outer), tracectx(None) as inner:
        assert inner is None and get_tracectx() is None
        with tracectx(outer):
            assert get_tracectx() is outer
    assert get_tracectx() is None


def test_exception_restores_and_propagates(make_trace: MakeTrace) -> None:
    a, b = make_trace(), make_trace()
    with tracectx(a):
        with pytest.raises(KeyError, match="boom"):
            with tracectx(b):
                raise KeyError("boom")
        assert get_tracectx() is a


def test_thunder_code_inside_sees_the_trace_and_balanced_raw_sets_are_fine(make_trace: MakeTrace) -> None:
    a, b = make_trace(), make_trace()
    with tracectx(a):
        with thunder_tracectx(b):
            assert get_tracectx() is b
        token = set_tracectx(b)
        reset_tracectx(token)
        assert get_tracectx() is a


def test_decorator_makes_a_fresh_block_per_call_including_recursion(make_trace: MakeTrace) -> None:
    trace = make_trace()
    seen: list[TraceCtx | None] = []

    @tracectx(trace)
    def recurse(depth: int) -> int:
        seen.append(get_tracectx())
        return depth if depth == 0 else recurse(depth - 1)

    assert recurse.__name__ == "recurse"
    assert recurse(3) == 0
    assert recurse(1) == 0
    assert seen == [trace] * 6
    assert get_tracectx() is None


def test_decorator_restores_after_exception(make_trace: MakeTrace) -> None:
    @tracectx(make_trace())
    def fails() -> None:
        raise ValueError("inside")

    with pytest.raises(ValueError, match="inside"):
        fails()
    assert get_tracectx() is None


def test_entering_the_same_instance_twice_is_a_type_error(make_trace: MakeTrace) -> None:
    trace = make_trace()
    manager = tracectx(trace)
    with manager:
        with pytest.raises(TypeError, match="already entered; create a new one"):
            with manager:
                pass  # pragma: no cover
        assert get_tracectx() is trace
    with pytest.raises(TypeError, match="already entered"):
        manager.__enter__()
    assert get_tracectx() is None


#: Each block class, and how to construct a subclass of it around a trace.
BLOCK_CLASSES = [
    (tracectx, lambda cls, trace: cls(trace)),
    (scratch_trace, lambda cls, trace: cls(trace)),
    (traceless, lambda cls, trace: cls()),
    (use_policy, lambda cls, trace: cls("strict")),
]


@pytest.mark.parametrize(("base", "make"), BLOCK_CLASSES)
def test_a_subclass_that_skips_the_base_init_is_told_to_call_it(base: type, make: Any, make_trace: MakeTrace) -> None:
    class Mine(base):  # type: ignore[misc]
        def __init__(self, *args: object) -> None:
            self.note = "forgot super().__init__"

    outer = make_trace()
    with tracectx(outer):
        with pytest.raises(TypeError, match=rf"Mine was never initialised: .*super\(\).__init__.*{base.__name__}.__init__"):
            with make(Mine, outer):
                pass  # pragma: no cover
        assert get_tracectx() is outer
    assert get_tracectx() is None


@pytest.mark.parametrize(("base", "make"), BLOCK_CLASSES)
def test_an_uninitialised_subclass_is_told_at_exit_at_decoration_and_with_some_fields_set(
    base: type, make: Any, make_trace: MakeTrace
) -> None:
    import contextlib

    class Mine(base):  # type: ignore[misc]
        def __init__(self, *args: object) -> None:
            pass

    class Partial(base):  # type: ignore[misc]
        def __init__(self, *args: object) -> None:
            self._state = 0  # NEW, but neither _value nor _snapshots

    outer = make_trace()
    message = rf"was never initialised: .*{base.__name__}.__init__"
    with tracectx(outer):
        with pytest.raises(TypeError, match="Partial " + message):
            with make(Partial, outer):
                pass  # pragma: no cover
        with pytest.raises(TypeError, match="Mine " + message):  # was AttributeError '_state'
            with contextlib.ExitStack() as stack:
                stack.push(make(Mine, outer))
        with pytest.raises(TypeError, match="Mine " + message):  # at decoration (traceless's ran a plain traceless)
            make(Mine, outer)(lambda: None)
        assert get_tracectx() is outer
    assert get_tracectx() is None and open_blocks() == []


@pytest.mark.parametrize("bad", [42, "not a trace", object(), [TraceCtx()]])
def test_bad_trace_is_a_type_error_naming_the_type(bad: object) -> None:
    with pytest.raises(TypeError, match=f"takes a thunder TraceCtx or None, got {type(bad).__name__}"):
        tracectx(bad)  # type: ignore[type-var]
    assert get_tracectx() is None


def _out_of_order(a: TraceCtx, b: TraceCtx) -> None:
    outer, inner = tracectx(a), tracectx(b)
    outer.__enter__()
    inner.__enter__()
    outer.__exit__(None, None, None)


def test_out_of_order_exit_raises_after_restoring(make_trace: MakeTrace) -> None:
    a, b = make_trace(), make_trace()
    with pytest.raises(UnbalancedContextError) as info:
        _out_of_order(a, b)
    message = str(info.value)
    assert "blocks entered inside it were still open" in message
    assert __file__ in message  # the user's line, not this package's
    assert "fix:" in message
    assert get_tracectx() is None


def test_out_of_order_through_exitstack_and_the_orphan_exits_silently(make_trace: MakeTrace) -> None:
    a, b, c = make_trace(), make_trace(), make_trace()
    with tracectx(c):
        stack = contextlib.ExitStack()
        outer = tracectx(a)
        inner = tracectx(b)
        stack.enter_context(outer)
        stack.enter_context(inner)
        with pytest.raises(UnbalancedContextError, match="still open"):
            outer.__exit__(None, None, None)
        assert get_tracectx() is c
        # inner exits now: silent, it was closed with outer; outer's second exit is reported
        with pytest.raises(UnbalancedContextError, match="exited a second time"):
            stack.close()
        assert get_tracectx() is c


def test_no_exit_reactivates_an_ended_trace(make_trace: MakeTrace) -> None:
    a, b, c = make_trace(), make_trace(), make_trace()
    with use_policy("strict", unbalanced="ignore"):
        ma, mb = tracectx(a), tracectx(b)
        ma.__enter__()
        mb.__enter__()
        ma.__exit__(None, None, None)  # closes b too
        assert get_tracectx() is None
        with tracectx(c):
            mb.__exit__(None, None, None)  # b is no longer active: c stays
            assert get_tracectx() is c
        assert get_tracectx() is None


def test_exiting_twice_is_reported_and_changes_nothing(make_trace: MakeTrace) -> None:
    a = make_trace()
    manager = tracectx(a)
    with manager:
        pass
    with tracectx(make_trace()) as other:
        with pytest.raises(UnbalancedContextError, match="exited a second time"):
            manager.__exit__(None, None, None)
        assert get_tracectx() is other


def test_exit_without_enter_is_reported(make_trace: MakeTrace) -> None:
    with pytest.raises(UnbalancedContextError, match="without being entered"):
        tracectx(make_trace()).__exit__(None, None, None)
    assert get_tracectx() is None


def test_inner_raw_set_never_reset_is_reported_and_undone(make_trace: MakeTrace) -> None:
    a, leaked = make_trace(), make_trace()
    with pytest.raises(UnbalancedContextError, match="inner set_tracectx\\(\\) was never reset"):
        with tracectx(a):
            set_tracectx(leaked)
    assert get_tracectx() is None


def test_inner_raw_set_leak_through_an_exception_is_undone(make_trace: MakeTrace) -> None:
    """The pattern of thunder's detached_trace: set, yield, reset without finally."""
    a, detached = make_trace(), make_trace()

    @contextlib.contextmanager
    def unsafe() -> Iterator[None]:
        token = set_tracectx(detached)
        yield
        reset_tracectx(token)

    with use_policy("strict", unbalanced="warn"):
        with pytest.warns(TraceContextWarning, match="never reset"):
            with pytest.raises(RuntimeError, match="inside"):
                with tracectx(a):
                    with unsafe():
                        raise RuntimeError("inside")
    assert get_tracectx() is None


def test_generator_suspended_inside_a_block(make_trace: MakeTrace) -> None:
    a, b = make_trace(), make_trace()

    def producer() -> Generator[int, None, None]:
        with tracectx(a):
            yield 1
            yield 2

    gen = producer()
    next(gen)
    assert get_tracectx() is a  # a generator shares the caller's context
    with use_policy("strict", unbalanced="log"):
        with tracectx(b):
            gen.close()  # a's block ends under b: out of order, b is closed with it
            assert get_tracectx() is None
    assert get_tracectx() is None


def test_exit_in_another_thread_is_reported_and_the_entering_thread_recovers(make_trace: MakeTrace) -> None:
    a, b = make_trace(), make_trace()
    manager = tracectx(a)
    manager.__enter__()
    errors: list[BaseException] = []

    def exit_elsewhere() -> None:
        try:
            manager.__exit__(None, None, None)
        except BaseException as error:  # noqa: BLE001 - collected for the assertion
            errors.append(error)
        errors.append(AssertionError("still None here")) if get_tracectx() is not None else None

    thread = threading.Thread(target=exit_elsewhere)
    thread.start()
    thread.join()
    assert len(errors) == 1 and isinstance(errors[0], UnbalancedContextError)
    assert "another thread or Context" in str(errors[0])
    # The wrong-thread exit changed nothing: the block is still open here, and its owner closes it.
    assert get_tracectx() is a
    with tracectx(b):
        assert get_tracectx() is b
    assert get_tracectx() is a, "a balanced block restores what was active at its enter"
    manager.__exit__(None, None, None)  # the owner's exit: no report
    assert get_tracectx() is None


def test_exit_in_a_copied_context_is_reported_and_leaves_both_contexts_consistent(make_trace: MakeTrace) -> None:
    a = make_trace()
    manager = tracectx(a)
    with use_policy("strict"):
        manager.__enter__()
        copied = contextvars.copy_context()
        with pytest.raises(UnbalancedContextError, match="different Context"):
            copied.run(manager.__exit__, None, None, None)
        assert copied.run(get_tracectx) is a
    # Nothing changed: the block is still open where it was entered, and its owner exits it.
    assert get_tracectx() is a
    with tracectx(make_trace()):
        pass
    assert get_tracectx() is a
    manager.__exit__(None, None, None)
    assert get_tracectx() is None


@pytest.mark.parametrize("action", ["warn", "log", "ignore"])
def test_unbalanced_actions_other_than_raise_still_restore(
    action: Action, make_trace: MakeTrace, caplog: pytest.LogCaptureFixture
) -> None:
    a, b = make_trace(), make_trace()
    with use_policy("strict", unbalanced=action):
        if action == "warn":
            with pytest.warns(TraceContextWarning, match="still open") as record:
                _out_of_order(a, b)
            assert record[0].filename == __file__  # attributed to the user's line
        else:
            with caplog.at_level(logging.WARNING, logger="safe_tracectx"):
                _out_of_order(a, b)
            logged = [r for r in caplog.records if r.name == "safe_tracectx"]
            assert (len(logged) == 1) == (action == "log")
    assert get_tracectx() is None


# ---- exits from other threads and copied Contexts, failed enters, SystemExit, generators and coroutines ----

import asyncio  # noqa: E402

from safe_tracectx import LENIENT, STRICT, Policy, get_policy  # noqa: E402


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


def test_an_exit_from_another_thread_changes_nothing_and_the_owner_can_still_exit(make_trace: MakeTrace) -> None:
    a = make_trace()
    manager = tracectx(a)
    manager.__enter__()
    errors = _in_thread(lambda: manager.__exit__(None, None, None))
    assert len(errors) == 1 and "another thread or Context" in str(errors[0])
    assert get_tracectx() is a
    manager.__exit__(None, None, None)  # no "exited a second time"
    assert get_tracectx() is None


def test_a_block_in_a_copied_context_restores_what_the_copy_saw_when_the_original_block_has_ended(
    make_trace: MakeTrace
) -> None:
    a, b = make_trace(), make_trace()
    with tracectx(a):
        copied = contextvars.copy_context()

    def inside() -> object:
        with tracectx(b):
            pass
        return get_tracectx()

    assert copied.run(inside) is a  # what was active at B's enter, as Thunder's own tracectx does


def test_an_enter_that_raises_leaves_no_trace_active() -> None:
    broken = TraceCtx()
    broken.names = None  # type: ignore[assignment]
    with pytest.raises(TypeError):
        tracectx(broken, read_only=True).__enter__()
    assert get_tracectx() is None


def test_sys_exit_0_stays_sys_exit_when_it_passes_through_an_unbalanced_exit(make_trace: MakeTrace) -> None:
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


def test_decorated_generators_see_the_context_only_while_they_run(make_trace: MakeTrace) -> None:
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


def test_a_decorated_coroutine_sees_the_context_across_awaits_and_its_caller_does_not(make_trace: MakeTrace) -> None:
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


def test_blocks_inside_decorated_coroutines_and_generators_may_stay_open_across_await_and_yield(
    make_trace: MakeTrace
) -> None:
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


def test_decorating_an_async_generator_is_refused_with_a_type_error() -> None:
    async def agen() -> object:  # pragma: no cover - never run
        yield 1

    with pytest.raises(TypeError, match="cannot decorate the async generator"):
        tracectx(None)(agen)
