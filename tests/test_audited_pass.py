"""``audited_pass``: what it refuses (generators, coroutines, bad arguments) and says so clearly."""

from __future__ import annotations

import re
from collections.abc import Iterator
from types import SimpleNamespace
from typing import Any

import pytest
from thunder.core.trace import TraceCtx

import safe_tracectx as stc
from safe_tracectx import STRICT
from safe_tracectx.hooks import compilation as compilations
from safe_tracectx.hooks.audited import declared_passes


def _generator_pass(trace: TraceCtx) -> Iterator[TraceCtx]:
    yield trace


async def _coroutine_pass(trace: TraceCtx) -> TraceCtx:
    return trace


async def _async_generator_pass(trace: TraceCtx) -> Any:
    yield trace


@pytest.mark.parametrize(
    "fn, what",
    [(_generator_pass, "generator"), (_coroutine_pass, "coroutine"), (_async_generator_pass, "async generator")],
)
def test_a_generator_or_coroutine_function_is_refused_at_decoration_naming_the_fix(fn: Any, what: str) -> None:
    with pytest.raises(TypeError) as info:
        stc.audited_pass("lazy")(fn)
    message = str(info.value)
    assert f"audited_pass('lazy') cannot decorate the {what} function '{fn.__qualname__}'" in message
    assert "Decorate a plain function" in message and "with audited_pass('lazy', inputs=(...)) as p:" in message
    assert "lazy" not in declared_passes()


def test_a_generator_can_hold_an_audited_block_around_its_work() -> None:
    def regroup(trace: TraceCtx) -> Iterator[TraceCtx]:
        with stc.audited_pass("regroup step", inputs=(trace,)) as p:
            p.outputs(trace)
        yield trace

    with stc.audit() as log:
        assert len(list(regroup(TraceCtx()))) == 1
    assert [(r["label"], len(r["fingerprints"])) for r in log.pass_runs] == [("regroup step", 1)]


@pytest.mark.parametrize(
    "kwargs, error, message",
    [
        ({"role": "fw"}, ValueError, "role='fw' is not a role; use None (found from the input), 'forward' or 'backward'"),
        ({"role": 1}, ValueError, "role=1 is not a role"),
        ({"pair": "yes"}, TypeError, "pair takes True or False, got str ('yes')"),
        ({"pair": 1}, TypeError, "pair takes True or False, got int (1)"),
        ({"pair": True, "role": "forward"}, ValueError, "pair=True validates two outputs as (forward, backward), so "
         "role='forward' cannot apply; drop role="),
        ({"inputs": TraceCtx()}, TypeError, "inputs takes an iterable of traces, e.g. inputs=(trace,), got a single TraceCtx"),
        ({"inputs": "fw"}, TypeError, "inputs takes an iterable of traces, e.g. inputs=(trace,), got str ('fw')"),
        ({"inputs": 3}, TypeError, "inputs takes an iterable of traces, e.g. inputs=(trace,), got int (3)"),
        ({"inputs": (TraceCtx(), 3)}, TypeError, "each of inputs must be a TraceCtx, a tuple or list of them, or "
         "Thunder's TraceResults (or None), got int (3)"),
        ({"kind": "remix"}, ValueError, "kind='remix' is not a kind of pass; use one of: transform, autodiff, "
         "execution, split, fusion, remat, user"),
        # a user's pass never starts a compilation (that reset the forward/backward pair mid-compile)
        ({"kind": "tracing"}, ValueError, "kind='tracing' is the interpretation of a thunder.jit compile, which "
         "starts a compilation; a pass of yours is one of: transform, autodiff"),
        ({"kind": "thunderfx"}, ValueError, "kind='thunderfx' is the ThunderFX splitter's (torch.compile with "
         "Thunder as its backend); a pass of yours is one of: transform, autodiff"),
    ],
)
def test_bad_arguments_are_refused_naming_the_argument_the_value_and_what_is_accepted(
    kwargs: dict[str, Any], error: type[Exception], message: str
) -> None:
    with pytest.raises(error, match=re.escape(f"audited_pass('p'): {message}")):
        stc.audited_pass("p", **kwargs)


def test_a_label_must_be_a_non_empty_str() -> None:
    for label in ("", "  ", None):
        with pytest.raises(TypeError, match=re.escape("audited_pass() takes its label as a non-empty str, got")):
            stc.audited_pass(label)  # type: ignore[arg-type]


def test_inputs_belong_to_a_block_and_a_decorator_takes_a_callable() -> None:
    with pytest.raises(ValueError, match=re.escape("audited_pass('p'): inputs= is for a with-block; a decorated "
                                                   "function's inputs are its arguments: drop inputs=")):
        stc.audited_pass("p", inputs=(TraceCtx(),))(lambda trace: trace)
    with pytest.raises(TypeError, match=re.escape("audited_pass('p') decorates a function, got str ('f')")):
        stc.audited_pass("p")("f")  # type: ignore[arg-type]


def test_a_pair_pass_that_does_not_produce_two_traces_is_refused_at_call_while_installed() -> None:
    @stc.audited_pass("half pair", pair=True)
    def half(trace: TraceCtx) -> TraceCtx:
        return trace

    @stc.audited_pass("whole pair", pair=True)
    def whole(trace: TraceCtx) -> tuple[TraceCtx, TraceCtx]:
        return trace, TraceCtx()

    @stc.audited_pass("no backward", pair=True)
    def forward_only(trace: TraceCtx) -> tuple[TraceCtx, None]:
        return trace, None

    with stc.audit():
        assert len(whole(TraceCtx())) == 2
        assert forward_only(TraceCtx())[1] is None  # a side may be absent
        with pytest.raises(ValueError, match=r"audited_pass\('half pair'\) \(.*half\) has pair=True but produced 1 "
                                             r"trace\(s\) in a single TraceCtx; a pair pass produces \(forward, backward\)"):
            half(TraceCtx())
        with pytest.raises(ValueError, match=r"the block audited_pass\('by hand'\) has pair=True but produced 0 trace"):
            with stc.audited_pass("by hand", pair=True):
                pass
        with stc.audited_pass("by hand, as one tuple", pair=True) as p:
            p.outputs((TraceCtx(), TraceCtx()))


def test_not_installed_an_audited_pass_only_calls_through() -> None:
    """Even a pair pass that returns one trace: the check belongs to the audit, not to production runs."""

    @stc.audited_pass("half pair", pair=True)
    def half(trace: TraceCtx) -> TraceCtx:
        return trace

    trace = TraceCtx()
    assert half(trace) is trace
    with stc.audited_pass("by hand", pair=True):
        pass


def test_none_is_an_absent_trace_in_inputs_and_outputs() -> None:
    fw = TraceCtx()
    with stc.audit() as log:
        with stc.audited_pass("optional backward", inputs=(fw, None)) as p:
            p.outputs(fw, None)
    (run,) = [r for r in log.pass_runs if r["label"] == "optional backward"]
    assert len(run["fingerprints"]) == 1  # one output: the absent backward is no trace


def test_outputs_take_traces() -> None:
    with stc.audited_pass("by hand") as p:
        with pytest.raises(TypeError, match=re.escape("audited_pass('by hand').outputs() takes a TraceCtx, a tuple or "
                                                      "list of them, or Thunder's TraceResults (or None), got str ('t0')")):
            p.outputs("t0")
        p.outputs(TraceCtx(), [TraceCtx()])


def test_a_bare_decorator_is_refused_naming_the_call_to_write() -> None:
    def regroup(trace: TraceCtx) -> TraceCtx:
        return trace

    with pytest.raises(TypeError, match=re.escape("got the function 'test_a_bare_decorator_is_refused_naming_the_call_"
                                                  "to_write.<locals>.regroup': call it with the label, "
                                                  "@audited_pass('regroup'), not bare @audited_pass")):
        stc.audited_pass(regroup)  # type: ignore[arg-type]


@pytest.mark.parametrize("wrapper", [staticmethod, classmethod])
def test_a_static_or_class_method_object_is_refused_naming_the_order_to_write(wrapper: Any) -> None:
    def regroup(trace: TraceCtx) -> TraceCtx:
        return trace

    name = wrapper.__name__
    with pytest.raises(TypeError, match=re.escape(f"audited_pass('p') decorates a function, got a {name} object") +
                       r".*" + re.escape(f": put @{name} above @audited_pass('p')")):
        stc.audited_pass("p")(wrapper(regroup))

    class Passes:  # the order the message asks for works, called on an instance too
        @staticmethod
        @stc.audited_pass("static")
        def static(trace: TraceCtx) -> TraceCtx:
            return trace

    trace = TraceCtx()
    assert Passes().static(trace) is trace and Passes.static(trace) is trace


def _trace(fn_name: str, *outputs: tuple[str, str]) -> TraceCtx:
    """A trace of the function ``fn_name`` whose bound symbols (symbol, output name) define those names."""
    def fn(x: Any) -> None:
        pass

    fn.__name__ = fn.__qualname__ = fn_name  # the trace's signature name (backward_fn: a backward)
    trace = TraceCtx(fn)
    for symbol, name in outputs:
        trace.bound_symbols.append(
            SimpleNamespace(sym=SimpleNamespace(name=symbol), flat_proxy_args=[], subsymbols=[],
                            flat_proxy_outs=[SimpleNamespace(name=name)])  # type: ignore[arg-type]
        )
        trace.names.add(name)
    return trace


def test_a_pair_pass_with_an_absent_side_replaces_only_the_side_it_produced() -> None:
    """(None, bw) from a pass given the forward: bw is the new backward, never taken for the forward."""
    start, fw = _trace("computation", ("add", "t0")), _trace("computation", ("add", "t0"))
    bw = _trace("backward_fn", ("unpack_trivial", "t0"), ("mul", "t1"))
    new_bw = _trace("backward_fn", ("unpack_trivial", "t0"), ("mul", "t1"))

    @stc.audited_pass("split", pair=True)
    def split(trace: TraceCtx) -> tuple[TraceCtx, TraceCtx]:
        return fw, bw

    @stc.audited_pass("new backward", pair=True)
    def regenerate(forward: TraceCtx, backward: TraceCtx) -> tuple[None, TraceCtx]:
        return None, new_bw

    with stc.installed(STRICT):
        compilation = compilations.start()
        compilation.add(start)
        split(start)
        assert regenerate(fw, bw)[1] is new_bw
        assert compilation.forward is fw and compilation.backward is new_bw
        step = compilation.step_of(new_bw)
        assert step is not None and step.culprit == ("new backward", f"{__name__}.{regenerate.__qualname__}")
