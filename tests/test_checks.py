"""check_trace and check_handover, judged by the program Thunder generates: each kind, the semantics, purity."""

from __future__ import annotations

import warnings
from typing import Any

import pytest
import torch
from thunder.core import prims
from thunder.core.devices import cpu
from thunder.core.dtypes import float32
from thunder.core.proxies import IntegerProxy, TensorProxy
from thunder.core.symbol import BoundSymbol, Symbol
from thunder.core.trace import TraceCtx, from_trace

from safe_tracectx import BrokenTraceError, LeakedProxyError, NameClashError, scratch_trace, traceless, tracectx
from safe_tracectx.errors import UseBeforeDefinitionError
from safe_tracectx.traces.checks import (
    Violation,
    check_forward_backward,
    check_handover,
    check_trace,
    generatable,
    region_name_clashes,
    trace_findings,
)
from safe_tracectx.traces.generated_code import undefined_globals

with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    import thunder


def _kinds(violations: list[Violation]) -> set[tuple[str, str]]:
    return {(v.kind, v.name) for v in violations}


def _state(trace: TraceCtx) -> tuple[object, ...]:
    return (
        trace.names, frozenset(trace.names), tuple(map(id, trace.bound_symbols)), trace.name_ctr, trace._siginfo,
        [tuple(sorted(b.__dict__)) for b in trace.bound_symbols],
    )


def _trace(*names: str) -> tuple[TraceCtx, list[TensorProxy]]:
    """A trace whose inputs are proxies with these names (registered), and the proxies."""
    trace = TraceCtx()
    with tracectx(trace):
        proxies = [TensorProxy(n, shape=(2,), device=cpu, dtype=float32) for n in names]
    trace.args = tuple(proxies)
    return trace, proxies


def _made(trace: TraceCtx, *names: str) -> list[TensorProxy]:
    with tracectx(trace):
        return [TensorProxy(n, shape=(2,), device=cpu, dtype=float32) for n in names]


def _returning(trace: TraceCtx, value: Any) -> None:
    trace.bound_symbols.append(prims.python_return.bind(value, output=None))


@pytest.fixture(scope="module")
def jitted_traces() -> tuple[list[TraceCtx], list[TraceCtx]]:
    def f(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
        return torch.nn.functional.gelu(x @ w).sum()

    jf = thunder.jit(f)
    x, w = torch.randn(4, 4, requires_grad=True), torch.randn(4, 4, requires_grad=True)
    jf(x, w).backward()
    return thunder.last_traces(jf), thunder.last_backward_traces(jf)


def test_clean_on_every_trace_thunder_keeps_and_reads_only(jitted_traces: tuple[list[TraceCtx], list[TraceCtx]]) -> None:
    fws, bws = jitted_traces
    for trace in [*fws, *bws]:
        before = _state(trace)
        assert check_trace(trace) == [] and check_trace(trace, executed=trace in (fws[-1], bws[-1])) == []
        assert _state(trace) == before  # nothing registered, no signature cached, no flattening cached
    assert check_handover(fws[-1], bws[-1]) == [] and check_forward_backward(fws[-1], bws[-1]) == []


def test_unlike_thunders_check_trace_nothing_is_registered(jitted_traces: tuple[list[TraceCtx], list[TraceCtx]]) -> None:
    from thunder.dev_utils.check_trace import check_trace as thunders_check

    trace = jitted_traces[0][0]
    before = len(trace.names)
    check_trace(trace)
    assert len(trace.names) == before
    thunders_check(trace)
    assert len(trace.names) > before  # the behaviour this package exists to catch


def test_a_use_before_definition_is_the_unbound_local_error_the_program_would_raise() -> None:
    trace, (a,) = _trace("a")
    with scratch_trace():
        ghost = TensorProxy("ghost", shape=(2,), device=cpu, dtype=float32)
    (out,) = _made(trace, "out")
    trace.bound_symbols.append(prims.add.bind(a, ghost, output=out))
    _returning(trace, out)
    (violation,) = check_trace(trace)
    assert (violation.kind, violation.name, violation.where) == ("use-before-definition", "ghost", "bound symbol 0 (add)")
    error = violation.to_error()
    assert isinstance(error, UseBeforeDefinitionError) and isinstance(error, UnboundLocalError)
    assert isinstance(error, BrokenTraceError) and error.check == "broken_trace" and error.kind == "use-before-definition"
    # ghost is a local of the generated function (del-last-used deletes what a statement reads): UnboundLocalError
    assert "UnboundLocalError: cannot access local variable 'ghost'" in str(error) and error.names == ("ghost",)
    only_returned, (b,) = _trace("b")
    _returning(only_returned, ghost)  # read by the return alone, assigned nowhere: a global name, NameError
    (violation,) = check_trace(only_returned, executed=True)
    assert "NameError: name 'ghost' is not defined" in violation.message
    assert isinstance(violation.to_error(), NameError)


def test_dead_code_thunder_removes_is_a_note_until_the_trace_is_about_to_run() -> None:
    trace, (a,) = _trace("a")
    with scratch_trace():
        ghost = TensorProxy("ghost", shape=(2,), device=cpu, dtype=float32)
    (unused,) = _made(trace, "unused")
    trace.bound_symbols.append(prims.add.bind(a, ghost, output=unused))  # nothing reads `unused`: DCE drops it
    _returning(trace, a)
    violations, notes = trace_findings(trace)
    assert violations == [] and _kinds(notes) == {("use-before-definition", "ghost")}
    assert _kinds(check_trace(trace, executed=True)) == {("use-before-definition", "ghost")}


def test_without_a_return_statement_nothing_is_dead() -> None:
    trace, (a,) = _trace("a")
    with scratch_trace():
        ghost = TensorProxy("ghost", shape=(2,), device=cpu, dtype=float32)
    (out,) = _made(trace, "out")
    trace.bound_symbols.append(prims.add.bind(a, ghost, output=out))
    assert _kinds(check_trace(trace)) == {("use-before-definition", "ghost")}


def test_dead_code_dces_cannot_remove_is_not_excused() -> None:
    # `value = f(value)`: a symbol that reads its own output is no producer of it (Thunder's ``producers``); when a
    # later symbol needs `value`, Thunder's DCE finds no producer and fails (#1632), so nothing is removed.
    trace, (a,) = _trace("a")
    (value, out) = _made(trace, "value", "out")
    trace.bound_symbols += [prims.neg.bind(value, output=value), prims.add.bind(a, value, output=out)]
    _returning(trace, out)
    assert _kinds(check_trace(trace)) == {("use-before-definition", "value")}


def test_a_name_defined_twice_is_reported_whatever_the_objects() -> None:
    trace, (a,) = _trace("a")
    (first,) = _made(trace, "b")
    with scratch_trace():
        second = TensorProxy("b", shape=(2,), device=cpu, dtype=float32)  # another proxy, the same name
    trace.bound_symbols += [prims.neg.bind(a, output=first), prims.neg.bind(a, output=second)]
    _returning(trace, second)
    (violation,) = check_trace(trace)
    assert (violation.kind, violation.name) == ("defined-twice", "b")
    assert violation.message == "b is defined again, after bound symbol 0 (neg)" and violation.where == "bound symbol 1 (neg)"
    assert isinstance(violation.to_error(), NameClashError)
    same_object = TraceCtx()
    same_object.args = (a,)
    same_object.bound_symbols += [prims.neg.bind(a, output=first), prims.neg.bind(a, output=first)]  # #1622's kind
    _returning(same_object, first)
    assert _kinds(check_trace(same_object)) == {("defined-twice", "b")}


def test_same_named_objects_are_one_variable_as_in_the_program() -> None:
    trace, (a,) = _trace("a")
    (b,) = _made(trace, "b")
    with scratch_trace():
        a_again = TensorProxy("a", shape=(2,), device=cpu, dtype=float32)  # older Thunder rebuilds inputs like this
        b_again = TensorProxy("b", shape=(2,), device=cpu, dtype=float32)
    trace.bound_symbols += [prims.neg.bind(a_again, output=b), prims.add.bind(b_again, a, output=None)]
    _returning(trace, b_again)
    assert check_trace(trace) == []


def test_what_binds_a_name_again_without_a_new_value_is_not_a_redefinition() -> None:
    trace, (a,) = _trace("a")
    (b, c) = _made(trace, "b", "c")
    with tracectx(trace):
        i = IntegerProxy("i0", 2)
    trace.bound_symbols += [
        prims.unpack_trivial.bind(a, name="a", output=a),  # names a parameter
        prims.neg.bind(a, output=b),
        Symbol(name="copy_", meta=None, _module=prims).bind(a, b, output=b),  # returns its own argument
        Symbol(name="unpack_sequence", meta=None, _module=prims).bind(a, output=(b,)),  # unpacks a value under its name
        prims.shape.bind(a, output=(i,)),
        prims.shape.bind(a, output=(i,)),  # a repeated shape query (remove_duplicate_number_proxies drops it)
        prims.shape.bind(b, output=(i,)),  # the same symbolic dimension, from another tensor's shape
        prims.add.bind(b, a, output=c),
    ]
    _returning(trace, c)
    assert check_trace(trace) == []


def test_a_shape_query_that_gives_a_parameter_again_is_not_a_redefinition() -> None:
    """``computation(x, i0, i1)`` then ``(i0, i1) = prims.shape(x)``: what thunder.jit makes of ``x.size(0)`` under
    symbolic values (the prologue unpacked i0 and i1 from that very shape); a number parameter computed again by
    another symbol is still a redefinition."""
    trace = TraceCtx()
    with tracectx(trace):
        i = IntegerProxy("i0", 2)
        a = TensorProxy("a", shape=(2,), device=cpu, dtype=float32)
        b = TensorProxy("b", shape=(3,), device=cpu, dtype=float32)
    a._shape = (i,)  # type: ignore[attr-defined]  # a's dimension is i0, as under symbolic values (a plain trace makes it an int)
    trace.args = (a, b, i)
    trace.bound_symbols += [prims.shape.bind(a, output=(i,))]
    _returning(trace, i)
    assert check_trace(trace) == []
    other = from_trace(trace)
    other.args = (a, b, i)
    other.bound_symbols = [prims.shape.bind(b, output=(i,))]  # b's length under the parameter's name: another value
    _returning(other, i)
    assert _kinds(check_trace(other)) == {("defined-twice", "i0")}
    item = Symbol(name="item", meta=None, _module=prims)
    trace.bound_symbols.insert(0, item.bind(a, output=i))
    assert _kinds(check_trace(trace)) == {("defined-twice", "i0")}


def test_a_symbolic_values_program_that_reads_a_dimension_is_as_plain_under_strict() -> None:
    from safe_tracectx import STRICT
    from safe_tracectx.hooks import audit, installed

    def size_and_numel(x: torch.Tensor) -> torch.Tensor:
        return x.exp() + x.numel() + x.size(0)

    x = torch.ones(2, 3)
    expected = thunder.jit(size_and_numel, cache="symbolic values")(x)
    with audit() as log, installed(STRICT):
        actual = thunder.jit(size_and_numel, cache="symbolic values")(x)
    torch.testing.assert_close(actual, expected)
    assert log.to_dict()["violations"] == []


def test_a_number_computed_again_from_another_value_is_a_redefinition() -> None:
    """``f0 = item(a); f0 = item(b)``: two values under one name (what reads f0 later gets the second)."""
    trace, (a, b) = _trace("a", "b")
    with tracectx(trace):
        f = IntegerProxy("f0", 2)
    item = Symbol(name="item", meta=None, _module=prims)
    trace.bound_symbols += [item.bind(a, output=f), item.bind(b, output=f)]
    _returning(trace, f)
    assert _kinds(check_trace(trace)) == {("defined-twice", "f0")}
    computed_twice = Symbol(name="neg", meta=None, _module=prims)
    (c,) = _made(trace, "c")
    again, (x,) = _trace("x")
    again.bound_symbols += [computed_twice.bind(x, output=c), computed_twice.bind(x, output=c)]
    _returning(again, c)
    assert _kinds(check_trace(again)) == {("defined-twice", "c")}  # a tensor computed twice may differ (random)


def test_a_name_returned_before_a_later_pass_defines_it_is_a_note() -> None:
    trace, (a,) = _trace("a")
    (grad,) = _made(trace, "t17")  # registered, defined by no symbol: the gradients before the grad transform
    _returning(trace, {"output": a, "grad_flat_args": [grad]})
    violations, notes = trace_findings(trace)
    assert violations == [] and _kinds(notes) == {("use-before-definition", "t17")}
    assert _kinds(check_trace(trace, executed=True)) == {("use-before-definition", "t17")}


def test_a_traceless_proxy_smuggled_into_a_trace() -> None:
    trace, (a,) = _trace("a")
    with traceless():
        smuggled = TensorProxy(shape=(2,), device=cpu, dtype=float32)
    (out,) = _made(trace, "out")
    trace.bound_symbols.append(prims.add.bind(a, smuggled, output=out))
    leaked = [v for v in check_trace(trace) if v.kind == "traceless-proxy"]
    assert [v.name for v in leaked] == [smuggled.name]
    error = leaked[0].to_error()
    assert isinstance(error, LeakedProxyError) and "recreate it inside `with tracectx(trace):`" in str(error)


@pytest.mark.parametrize(
    ("name", "counter", "expected"),
    [("t5", 0, True), ("t5", 5, True), ("t5", 6, False), ("bw_t5", 0, False), ("grad_for_a", 0, False), ("i3", 2, True)],
)
def test_an_unregistered_name_is_about_to_clash_only_if_the_namer_can_still_hand_it_out(
    name: str, counter: int, expected: bool
) -> None:
    trace = TraceCtx()
    trace.name_ctr = counter
    assert generatable(name, trace) is expected


def test_an_unregistered_name_the_namer_will_hand_out_is_reported() -> None:
    trace, (a,) = _trace("a")
    with scratch_trace():
        lent = TensorProxy("t3", shape=(2,), device=cpu, dtype=float32)  # registered elsewhere, not here
    trace.bound_symbols.append(prims.neg.bind(a, output=lent))
    _returning(trace, lent)
    assert _kinds(check_trace(trace)) == {("unregistered-name", "t3")}
    trace.name_ctr = 4  # the namer is past it: it can never hand out t3 again
    assert check_trace(trace) == []


def _fusion(name: str, inputs: tuple[TensorProxy, ...], output: TensorProxy, subsymbols: list[BoundSymbol]) -> BoundSymbol:
    return Symbol(name=name, meta=None, is_fusion=True).bind(
        *inputs, output=output, subsymbols=subsymbols, _call_ctx={name: None}  # a fusion is called by its name
    )


def test_a_fusion_region_reads_only_its_inputs_and_what_it_defined() -> None:
    trace, (a,) = _trace("a")
    (x0, out) = _made(trace, "x0", "o0")
    with scratch_trace():
        outside = TensorProxy("outside", shape=(2,), device=cpu, dtype=float32)
    trace.bound_symbols += [
        prims.neg.bind(a, output=outside),
        _fusion("Fusion0", (a,), out, [prims.neg.bind(a, output=x0), prims.add.bind(x0, outside, output=out)]),
    ]
    _returning(trace, out)
    (violation,) = check_trace(trace)
    assert (violation.kind, violation.name) == ("use-before-definition", "outside")
    assert "fusion region Fusion0" in violation.message and "NameError" in violation.message


def test_names_computed_in_two_regions_are_refused_to_rematerialization() -> None:
    trace, (a,) = _trace("a")
    (x0, out0, out1) = _made(trace, "x0", "o0", "o1")
    trace.bound_symbols += [
        _fusion("Fusion0", (a,), out0, [prims.neg.bind(a, output=x0), prims.add.bind(x0, a, output=out0)]),
        _fusion("Fusion1", (a, out0), out1, [prims.neg.bind(a, output=x0), prims.add.bind(x0, out0, output=out1)]),
    ]
    _returning(trace, out1)
    (clash,) = region_name_clashes(trace)
    assert (clash.kind, clash.name) == ("fusion-name-clash", "x0")
    assert "bound symbol 0 (Fusion0) and bound symbol 1 (Fusion1)" in clash.message
    assert isinstance(clash.to_error(), NameClashError)
    assert check_trace(trace) == []  # a region's names are its own function's locals: fine in the program


def test_a_backward_region_recomputing_a_forward_value_under_its_name_is_no_clash_before_the_split() -> None:
    """torch_compile_ex's joint trace (Thunder 0.2.6): the backward region recomputes the forward's x0 from the
    same names; the split gives each side its own definition. Computed otherwise, it is a clash."""
    for recomputed, clashes in ((prims.neg, False), (prims.exp, True)):
        trace, (a,) = _trace("a")
        (x0, out0, g, out1) = _made(trace, "x0", "o0", "g", "o1")
        trace.bound_symbols += [
            _fusion("Fusion0", (a,), out0, [prims.neg.bind(a, output=x0), prims.add.bind(x0, a, output=out0)]),
            prims.get_grad.bind(out0, output=g),
            _fusion("Fusion1", (a, g), out1, [recomputed.bind(a, output=x0), prims.mul.bind(x0, g, output=out1)]),
        ]
        _returning(trace, out1)
        assert _kinds(region_name_clashes(trace)) == ({("fusion-name-clash", "x0")} if clashes else set())


def test_a_callee_the_program_cannot_name() -> None:
    trace, (a,) = _trace("a")
    (b, c, d) = _made(trace, "b", "c", "d")
    dotted = Symbol(name="debug_pre_torch.ops.aten.neg", meta=None)  # #2617: printed as a call of that name
    imported = Symbol(name="torch.ops.aten.neg", meta=None)  # a dotted path from a module the program imports
    trace.bound_symbols += [
        BoundSymbol(dotted, args=(a,), kwargs={}, output=b, _call_ctx={"debug_pre_torch.ops.aten.neg": torch.neg}),
        BoundSymbol(imported, args=(b,), kwargs={}, output=c, _call_ctx={"torch.ops.aten.neg": torch.neg}),
        BoundSymbol(Symbol(name="myneg", meta=None), args=(c,), kwargs={}, output=d, _call_ctx={"other": torch.neg}),
    ]
    _returning(trace, d)
    # A trace on its way (Thunder transforms it further, an executor may replace the symbol): a note until it runs.
    violations, notes = trace_findings(trace)
    assert violations == [] and {v.name for v in notes} == {"debug_pre_torch.ops.aten.neg", "myneg"}
    found = {v.name: v for v in check_trace(trace, executed=True)}
    assert set(found) == {"debug_pre_torch.ops.aten.neg", "myneg"}
    assert "'debug_pre_torch' is not defined" in found["debug_pre_torch.ops.aten.neg"].message
    assert "its call context does not define" in found["myneg"].message
    assert all(v.kind == "generated-code" and isinstance(v.to_error(), BrokenTraceError) for v in found.values())


def test_undefined_globals_reads_the_bytecode() -> None:
    def program(x: Any) -> Any:
        import os

        return sorted(x) + [os.sep, missing_one, (lambda: missing_two)()]  # type: ignore[name-defined] # noqa: F821

    assert undefined_globals(program) == ["missing_one", "missing_two"]
    assert undefined_globals(len) == []


def test_the_hand_over_of_a_real_pair(jitted_traces: tuple[list[TraceCtx], list[TraceCtx]]) -> None:
    fw, bw = jitted_traces[0][-1], jitted_traces[1][-1]
    assert check_handover(fw, bw) == []
    unpack = next(b for b in bw.bound_symbols if b.sym.name == "unpack_sequence" and len(b.flat_proxy_outs) > 2)
    shorter = from_trace(bw)
    shorter.bound_symbols = [
        b.from_bsym(output=[*b.output[:-1]]) if b is unpack else b for b in bw.bound_symbols
    ]
    (violation,) = [v for v in check_handover(fw, shorter) if "saved tensors" in v.message]
    assert violation.kind == "handover-mismatch" and "the backward unpacks" in violation.message
    assert isinstance(violation.to_error(), BrokenTraceError)


def test_a_renamed_position_in_the_hand_over(jitted_traces: tuple[list[TraceCtx], list[TraceCtx]]) -> None:
    fw, bw = jitted_traces[0][-1], jitted_traces[1][-1]
    unpack = next(b for b in bw.bound_symbols if b.sym.name == "unpack_sequence" and len(b.flat_proxy_outs) > 2)
    with scratch_trace():
        stranger = unpack.output[0].replace(name="stranger")
    renamed = from_trace(bw)
    renamed.bound_symbols = [
        b.from_bsym(output=[stranger, *b.output[1:]]) if b is unpack else b for b in bw.bound_symbols
    ]
    (violation,) = check_handover(fw, renamed)
    assert violation.name == "stranger" and "position 0 of the saved tensors is named" in violation.message


def test_a_backward_returning_more_than_one_gradient_per_input(jitted_traces: tuple[list[TraceCtx], list[TraceCtx]]) -> None:
    fw, bw = jitted_traces[0][-1], jitted_traces[1][-1]
    ret = bw.bound_symbols[-1]
    extra = from_trace(bw)
    extra.bound_symbols = [*bw.bound_symbols[:-1], ret.from_bsym(args=((*ret.args[0], ret.args[0][0]),))]
    (violation,) = check_handover(fw, extra)
    returned = [g.name for g in extra.bound_symbols[-1].args[0]]
    inputs = [p.name for p in fw.args]
    assert f"the backward returns 3 values ({', '.join(returned)}) but the forward has 2 inputs to give a gradient " \
        f"to ({', '.join(inputs)})" in violation.message
    assert violation.to_error().names == tuple(dict.fromkeys(returned))  # which is extra is unknowable: all named


def test_what_the_backward_never_unpacks_is_said_only_when_asked() -> None:
    fw, bw = TraceCtx(), TraceCtx()
    with tracectx(fw):
        frozen = TensorProxy("frozen", shape=(2,), device=cpu, dtype=float32)
    _returning(fw, ({"flat_args": [frozen]}, ((frozen,), ())))

    def backward_fn(saved_for_backward: Any, cotangents: Any) -> None: ...

    bw.fn = backward_fn
    assert check_handover(fw, bw) == []
    assert check_handover(fw, bw, unread=True) == []  # no unpacking of saved_for_backward at all: not a backward yet


def test_bad_input_is_a_type_error() -> None:
    with pytest.raises(TypeError, match="check_trace\\(\\) takes a thunder TraceCtx, got str"):
        check_trace("trace")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="bw must be a thunder TraceCtx, got int"):
        check_forward_backward(TraceCtx(), 3)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="fw must be a thunder TraceCtx, got NoneType"):
        check_handover(None, TraceCtx())  # type: ignore[arg-type]


def test_a_backward_symbol_that_lost_its_tag_is_a_note_naming_the_cotangent(
    jitted_traces: tuple[list[TraceCtx], list[TraceCtx]],
) -> None:
    """#2336's class: a pass rebuilds backward symbols without BoundSymbolTag.BACKWARD, so a fusion pass may
    group them with the forward. The joint trace is still a right program: a note (what the culprit search
    finds), never a violation of its own, and nothing when the trace is about to run."""
    from thunder.core.symbol import BoundSymbolTag

    from safe_tracectx.traces.program import Program

    (joint,) = [t for t in jitted_traces[0] if Program(t).is_joint()]
    assert trace_findings(joint) == ([], [])
    cotangent = next(b for b in joint.bound_symbols if b.sym.name == "get_grad").output.name
    stripped = from_trace(joint)
    first = True
    for bsym in joint.bound_symbols:
        if first and BoundSymbolTag.BACKWARD in bsym.tags and bsym.sym.name != "get_grad":
            bsym, first = bsym.from_bsym(tags=bsym.tags - {BoundSymbolTag.BACKWARD}), False
        stripped.bound_symbols.append(bsym)
    before = _state(stripped)
    violations, notes = trace_findings(stripped)
    assert violations == [] and _kinds(notes) == {("forward-reads-backward", cotangent)}
    assert "without the BACKWARD tag" in notes[0].message
    assert trace_findings(stripped, executed=True) == ([], [])
    assert _state(stripped) == before
