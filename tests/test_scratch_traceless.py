"""scratch_trace and traceless on real Thunder traces and proxies."""

from __future__ import annotations

import warnings
from collections.abc import Callable

import pytest
import torch
from thunder.core import prims
from thunder.core.devices import cpu
from thunder.core.dtypes import float32
from thunder.core.proxies import TensorProxy
from thunder.core.trace import TraceCtx, from_trace, get_tracectx

from safe_tracectx import (
    NameClashError,
    ScratchTrace,
    TracelessRecordingError,
    is_traceless,
    scratch_trace,
    traceless,
    traceless_tensorproxy,
    tracectx,
)

MakeTrace = Callable[..., TraceCtx]


def _state(trace: TraceCtx) -> tuple[object, ...]:
    return (trace.names, frozenset(trace.names), tuple(map(id, trace.bound_symbols)), trace.name_ctr)


@pytest.fixture(scope="module")
def fw_bw() -> tuple[TraceCtx, TraceCtx]:
    """The last forward and backward traces of a real thunder.jit run."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        import thunder

    def model(x: torch.Tensor) -> torch.Tensor:
        return torch.tanh(x * 3.0).sum()

    jitted = thunder.jit(model)
    jitted(torch.randn(5, requires_grad=True)).backward()
    return thunder.last_traces(jitted)[-1], thunder.last_backward_traces(jitted)[-1]


def test_scratch_names_avoid_both_traces_and_leave_them_byte_for_byte_unchanged(
    fw_bw: tuple[TraceCtx, TraceCtx],
) -> None:
    fw, bw = fw_bw
    before = (_state(fw), _state(bw))
    with scratch_trace(fw, bw) as scratch:
        assert isinstance(scratch, ScratchTrace) and get_tracectx() is scratch
        proxies = [TensorProxy(shape=(2,), device=cpu, dtype=float32) for _ in range(50)]
        named = scratch.make_name(prefix="t")
    created = [p.name for p in proxies] + [named]
    assert list(scratch.created_names) == created
    assert not set(created) & (fw.names | bw.names)
    assert (_state(fw), _state(bw)) == before


def test_scratch_copies_a_names_set_shared_through_from_trace(make_trace: MakeTrace) -> None:
    original = make_trace("t0", "t1")
    derived = from_trace(original)
    assert derived.names is original.names  # Thunder shares the set
    with scratch_trace(derived) as scratch:
        scratch.make_name(prefix="t")
        assert scratch.names is not original.names
    assert original.names == {"t0", "t1"}
    assert scratch.created_names == ("t2",)


def test_scratch_reserves_plain_names(make_trace: MakeTrace) -> None:
    with scratch_trace(names=["t0", "t1"]) as scratch:
        assert scratch.make_name(prefix="t") == "t2"


def test_commit_names_registers_and_refuses_a_taken_name_atomically(make_trace: MakeTrace) -> None:
    destination = make_trace("t0")
    with scratch_trace() as scratch:
        first = scratch.make_name(prefix="u")
    assert scratch.commit_names(into=destination) == (first,)
    assert destination.names == {"t0", first}

    clashing = make_trace("t0")
    with scratch_trace() as scratch2:
        scratch2.make_name(prefix="v")
        scratch2.make_name(name="t0")
    before = set(clashing.names)
    with pytest.raises(NameClashError, match="t0 already taken") as info:
        scratch2.commit_names(into=clashing)
    assert "nothing was committed" in str(info.value) and __file__ in str(info.value)
    assert clashing.names == before


def test_commit_names_rejects_a_non_trace() -> None:
    with scratch_trace() as scratch:
        pass
    with pytest.raises(TypeError, match="got str"):
        scratch.commit_names(into="trace")  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("args", "kwargs", "message"),
    [
        (("x",), {}, "reserve argument 0 must be a thunder TraceCtx, got str"),
        ((TraceCtx(), 3), {}, "reserve argument 1 must be a thunder TraceCtx, got int"),
        ((), {"names": "t0"}, "takes an iterable of names, got str"),
        ((), {"names": 5}, "takes an iterable of names, got int"),
        ((), {"names": ["ok", 3]}, "items must be str, got int"),
    ],
)
def test_scratch_bad_input_is_a_type_error_that_changes_nothing(
    args: tuple[object, ...], kwargs: dict[str, object], message: str
) -> None:
    with pytest.raises(TypeError, match=message):
        scratch_trace(*args, **kwargs)  # type: ignore[arg-type]
    assert get_tracectx() is None


def test_scratch_as_decorator_gives_each_call_a_fresh_trace(make_trace: MakeTrace) -> None:
    reserved = make_trace("t0")
    seen: list[TraceCtx] = []

    @scratch_trace(reserved)
    def name_one() -> str:
        trace = get_tracectx()
        assert isinstance(trace, ScratchTrace)
        seen.append(trace)
        return trace.make_name(prefix="t")

    assert name_one() == name_one() == "t1"
    assert seen[0] is not seen[1]


def test_seed_example_works_inside_traceless_with_automatic_names() -> None:
    with traceless():
        a = TensorProxy(shape=(1,), device=cpu, dtype=float32)
        b = TensorProxy(shape=(1,), device=cpu, dtype=float32)
    assert a.name != b.name and a.name.startswith("t") and a.name[1:].isdigit()
    assert is_traceless(a) and is_traceless(b)
    with traceless():
        c = TensorProxy(shape=(1,), device=cpu, dtype=float32)
    assert c.name not in {a.name, b.name}  # one counter across scopes


def test_meta_functions_run_on_traceless_proxies() -> None:
    with traceless():
        a = TensorProxy(shape=(2, 3), device=cpu, dtype=float32)
        out = prims.add.meta(a, a)
        summed = prims.sum.meta(out, (1,))
    assert tuple(out.shape) == (2, 3) and tuple(summed.shape) == (2,)
    assert is_traceless(out) and is_traceless(summed)


def test_recording_inside_traceless_raises_and_points_to_scratch_trace() -> None:
    with traceless():
        a = TensorProxy(shape=(2,), device=cpu, dtype=float32)
        with pytest.raises(TracelessRecordingError) as info:
            prims.add(a, a)
    message = str(info.value)
    assert "scratch_trace()" in message and "add" in message
    assert __file__ in message
    assert get_tracectx() is None


def test_proxies_from_a_real_trace_are_not_traceless(make_trace: MakeTrace) -> None:
    with tracectx(make_trace()):
        real = TensorProxy(shape=(1,), device=cpu, dtype=float32)
    assert not is_traceless(real)
    assert not is_traceless(object()) and not is_traceless(3)


def test_traceless_tensorproxy_accepts_thunder_and_torch_types() -> None:
    p = traceless_tensorproxy(shape=[2, 2], device="cpu", dtype=torch.float16, requires_grad=True)
    q = traceless_tensorproxy(shape=(3,), device=cpu, dtype=float32, name="mine")
    assert tuple(p.shape) == (2, 2) and p.requires_grad and is_traceless(p)
    assert q.name == "mine" and is_traceless(q)
    assert get_tracectx() is None
