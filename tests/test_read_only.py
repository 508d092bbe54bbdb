"""tracectx(trace, read_only=True): additions are a violation and are undone."""

from __future__ import annotations

import warnings
from collections.abc import Callable

import pytest
import torch
from thunder.core import prims
from thunder.core.devices import cpu
from thunder.core.dtypes import float32
from thunder.core.proxies import TensorProxy
from thunder.core.trace import TraceCtx, from_trace

from safe_tracectx import ReadOnlyTraceError, TraceContextWarning, tracectx, use_policy

MakeTrace = Callable[..., TraceCtx]


def _snapshot(trace: TraceCtx) -> tuple[object, ...]:
    # The names by value: a restore gives the trace a fresh set, so traces that shared the old one keep theirs.
    return (set(trace.names), trace.name_ctr, trace.bound_symbols, list(trace.bound_symbols))


def test_names_and_bound_symbols_added_are_reported_and_removed(make_trace: MakeTrace) -> None:
    trace = make_trace("keep")
    before = _snapshot(trace)
    with pytest.raises(ReadOnlyTraceError) as info:
        with tracectx(trace, read_only=True):
            a = TensorProxy(shape=(1,), device=cpu, dtype=float32)
            prims.add(a, a)
    message = str(info.value)
    assert "2 name(s)" in message and "1 bound symbol(s) (add)" in message
    assert "restored to its state at entry" in message and __file__ in message
    assert _snapshot(trace) == before


def test_reading_only_is_not_a_violation(make_trace: MakeTrace) -> None:
    trace = make_trace("t0")
    with tracectx(trace, read_only=True):
        assert trace.has_name("t0")
    assert trace.names == {"t0"}


def test_additions_through_a_shared_names_set_are_caught(make_trace: MakeTrace) -> None:
    trace = make_trace()
    with use_policy("strict", read_only="warn"):
        with pytest.warns(TraceContextWarning, match="1 name"):
            with tracectx(trace, read_only=True):
                from_trace(trace).add_name("sneaky")
    assert trace.names == set()


def test_read_only_catches_thunders_check_trace() -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        import thunder
        from thunder.dev_utils.check_trace import check_trace

    jitted = thunder.jit(lambda x: torch.sin(x) * 2.0)
    jitted(torch.randn(4))
    trace = thunder.last_traces(jitted)[0]
    before = _snapshot(trace)
    with pytest.raises(ReadOnlyTraceError, match="name\\(s\\)"):
        with tracectx(trace, read_only=True):
            check_trace(trace)
    assert _snapshot(trace) == before


def test_read_only_violation_and_exception_inside_both_surface(make_trace: MakeTrace) -> None:
    trace = make_trace()
    with pytest.raises(ReadOnlyTraceError) as info:
        with tracectx(trace, read_only=True):
            trace.add_name("x")
            raise KeyError("inner")
    assert isinstance(info.value.__context__, KeyError)
    assert trace.names == set()


# ---- read-only blocks in concurrent tasks, under BaseExceptions, and closed by their outer block ----

import asyncio  # noqa: E402

from thunder.core.trace import get_tracectx  # noqa: E402

from safe_tracectx.traces.checks import check_trace  # noqa: E402


def test_concurrent_read_only_readers_leave_the_shared_names_set_in_place(make_trace: MakeTrace) -> None:
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


@pytest.mark.parametrize("exception", [KeyboardInterrupt, SystemExit, GeneratorExit])
def test_a_read_only_violation_becomes_a_note_when_a_base_exception_is_raised_in_the_block(
    make_trace: MakeTrace, exception: type
) -> None:
    trace = make_trace()
    with pytest.raises(exception) as info:
        with tracectx(trace, read_only=True):
            trace.make_name()
            raise exception()
    assert any("ReadOnlyTraceError" in note or "read-only" in note for note in getattr(info.value, "__notes__", []))
    assert trace.names == set() and get_tracectx() is None


def test_undoing_read_only_additions_leaves_a_trace_made_inside_the_block_intact(make_trace: MakeTrace) -> None:
    trace = make_trace("x")
    with use_policy("strict", read_only="ignore"):
        with tracectx(trace, read_only=True):
            new = from_trace(trace)
            with tracectx(new):
                TensorProxy("y", shape=(1,), device=cpu, dtype=float32)
    assert trace.names == {"x"} and "y" in new.names
    assert [v.kind for v in check_trace(new)] == []


def test_the_late_exit_of_a_read_only_block_closed_by_its_outer_block_changes_nothing(make_trace: MakeTrace) -> None:
    a, b = make_trace(), make_trace("keep")
    outer, inner = tracectx(a), tracectx(b, read_only=True)
    with use_policy("strict", unbalanced="ignore"):
        outer.__enter__()
        inner.__enter__()
        outer.__exit__(None, None, None)  # closes inner with it
    b.names.discard("keep")
    inner.__exit__(None, None, None)
    assert b.names == set() and get_tracectx() is None
