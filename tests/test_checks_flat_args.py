"""flat-args-mismatch: a computation trace's return hands autograd (``flat_args``) its own arguments, by position.

#2093's LoRA pass added arguments and left ``flat_args`` as it was; Thunder 0.2.6's alias pass replaces an input
that shares no storage with the others when an unused input comes first (a wrong result, no error).
"""

from __future__ import annotations

import gc
import warnings
import weakref
from typing import Any

import pytest
import torch
from thunder.core import prims
from thunder.core.devices import cpu
from thunder.core.dtypes import float32
from thunder.core.proxies import TensorProxy
from thunder.core.trace import TraceCtx, tracectx

import safe_tracectx as stc
from safe_tracectx import STRICT, BrokenTraceError
from safe_tracectx.hooks import installed
from safe_tracectx.hooks import compilation as compilations
from safe_tracectx.traces.call_inputs import Region, call_storages, storage_keys, unpacked
from safe_tracectx.traces.checks import check_trace, trace_findings
from safe_tracectx.traces.flat_args import flat_args_mismatches

with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    import thunder


def _computation(*arguments: str, flat: list[str], updated: dict[str, str] | None = None) -> TraceCtx:
    """A computation trace of ``arguments`` returning ``{"output": ..., "flat_args": flat}``; ``updated`` maps a
    name to the argument an in-place update computes it from."""
    scope: dict[str, Any] = {}  # thunder.jit's name for the trace whose flat_args autograd reads, its parameters
    exec(f"def computation({', '.join(arguments)}): pass", scope)
    trace = TraceCtx(scope["computation"])
    with tracectx(trace):
        proxies = {n: TensorProxy(n, shape=(2,), device=cpu, dtype=float32) for n in arguments}
        for made, source in (updated or {}).items():
            proxies[made] = TensorProxy(made, shape=(2,), device=cpu, dtype=float32)
            trace.bound_symbols.append(prims.neg.bind(proxies[source], output=proxies[made]))
        out = TensorProxy("out", shape=(2,), device=cpu, dtype=float32)
        for name in (n for n in flat if n not in proxies):  # neither an argument nor computed: from outside
            proxies[name] = TensorProxy(name, shape=(2,), device=cpu, dtype=float32)
    trace.args = tuple(proxies[n] for n in arguments)
    trace.bound_symbols.append(prims.add.bind(trace.args[0], trace.args[-1], output=out))
    trace.bound_symbols.append(prims.python_return.bind({"output": out, "flat_args": [proxies[n] for n in flat]},
                                                        output=None))
    return trace


def _found(trace: TraceCtx, storages: dict[str, Region] | None = None) -> set[tuple[str, ...]]:
    return {m.names for m in flat_args_mismatches(trace, storages)}


def test_the_arguments_and_their_in_place_values_hand_over() -> None:
    assert _found(_computation("a", "b", flat=["a", "b"])) == set()
    assert _found(_computation("a", "b", flat=["t0", "b"], updated={"t0": "a"})) == set()
    assert check_trace(_computation("a", "b", flat=["t0", "b"], updated={"t0": "a"})) == []


def test_arguments_added_without_an_entry_are_named() -> None:
    trace = _computation("x", "w", "w_lora_a", "w_lora_b", flat=["x", "w"])
    (violation,) = check_trace(trace)
    assert violation.kind == "flat-args-mismatch" and isinstance(violation.to_error(), BrokenTraceError)
    assert violation.to_error().names == ("w_lora_a", "w_lora_b")
    assert "2 flat_args (x, w) for the trace's 4 arguments" in violation.message
    assert "new_return['flat_args']" in violation.fix


def test_an_entry_computed_from_no_argument_is_named() -> None:
    trace = _computation("a", "b", flat=["a", "c"])
    violation = next(v for v in check_trace(trace) if v.kind == "flat-args-mismatch")
    assert violation.to_error().names == ("b",) and "c is computed from no argument" in violation.message
    # a value made of another argument in b's place is the alias pass's way: taken on trust without the call
    assert _found(_computation("a", "b", flat=["a", "t0"], updated={"t0": "a"})) == set()


def _at(storage: int, offset: int = 0, shape: tuple[int, ...] = (2, 2), stride: tuple[int, ...] = (2, 1)) -> Region:
    return Region(storage, offset, shape, stride)


def test_another_input_in_an_arguments_place_must_be_the_same_elements() -> None:
    trace = _computation("y", "x", "a", flat=["y", "y", "y"])  # Thunder 0.2.6's replacement, as in its trace
    assert _found(trace) == set()  # without the call: the alias pass's replacement is taken on trust
    assert _found(trace, {"y": _at(1), "x": _at(1), "a": _at(1, shape=(4,), stride=(1,))}) == set()  # reshapes
    assert _found(trace, {"y": _at(1), "x": _at(1), "a": _at(2)}) == {("a", "y")}
    assert _found(trace, {"y": _at(1), "x": _at(1)}) == set()  # a not followed (a dataclass field): no judgement
    (violation,) = trace_findings(trace, storages={"y": _at(1), "x": _at(1), "a": _at(2)})[0]
    assert "do not share storage in this call" in violation.message and "alias_tensor_indices" in violation.fix
    halves = {"y": _at(1), "x": _at(1, offset=4), "a": _at(1, stride=(1, 2))}  # another offset, a transpose
    assert _found(trace, halves) == {("x", "y"), ("a", "y")}
    (half, _) = flat_args_mismatches(trace, halves)
    assert "share a storage in this call they are not the same elements (x at offset 4" in half.message


def test_regions_are_the_same_elements_when_one_is_a_reshape_of_the_other() -> None:
    base = torch.arange(8.0)
    (whole, matrix, tail, transposed, strided), _ = call_storages(
        (base, base.view(2, 4), base[4:], base.view(2, 4).t(), base[::2]), {}
    )
    assert whole.same_elements(matrix) and matrix.same_elements(whole)
    assert not whole.same_elements(tail) and whole.storage == tail.storage
    assert not matrix.same_elements(transposed) and transposed.same_elements(transposed)
    assert not whole.same_elements(strided) and not strided.contiguous()


def test_a_trace_a_pass_builds_for_itself_copies_flat_args_as_it_likes() -> None:
    """rematerialize_forward_and_backward's joint_fn takes the forward's and the backward's inputs and returns the
    forward's flat_args: only thunder.jit's computation hands them to autograd."""
    trace = _computation("x", "t14", flat=["x"])
    assert [v.kind for v in check_trace(trace)] == ["flat-args-mismatch"]
    scope: dict[str, Any] = {}
    exec("def joint_fn(x, t14): pass", scope)
    trace.fn = scope["joint_fn"]
    assert check_trace(trace) == []


def test_the_check_reads_only() -> None:
    trace = _computation("x", "w", "extra", flat=["x", "w"])
    before = (list(map(id, trace.bound_symbols)), set(trace.names), [dict(b.__dict__) for b in trace.bound_symbols])
    flat_args_mismatches(trace, {"x": _at(1)})
    assert before == (list(map(id, trace.bound_symbols)), set(trace.names), [dict(b.__dict__) for b in trace.bound_symbols])


def _with_unused_first(unused: Any, y: Any, x: Any, a: Any) -> Any:
    return a.exp().add_(x) + y


def _aliased_first(y: Any, x: Any, a: Any) -> Any:
    return a.exp().add_(x) + y


def _inputs() -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    torch.manual_seed(0)
    x = torch.randn(2, 2)
    return x[0], x.view(2, 2), x, torch.randn(2, 2)


def test_the_call_is_kept_as_storages_read_through_the_prologue() -> None:
    unused, y, x, a = _inputs()
    jitted = thunder.jit(_with_unused_first)
    jitted(unused, y, x, a)
    prologues: Any = thunder.last_prologue_traces(jitted)  # a list, though Thunder annotates it as one TraceCtx
    prologue = prologues[-1]
    call = call_storages((unused, y, x, a), {})
    assert call[0][0].storage == call[0][1].storage == call[0][2].storage != call[0][3].storage
    names = unpacked(prologue, (unused, y, x, a), {})
    assert names["a"] is a and names["x"] is x and names["y"] is y
    keys = storage_keys([prologue], call)
    y_elements, x_elements = keys["y"], keys["x"]
    assert y_elements == x_elements != keys["a"]
    assert y_elements is not None and x_elements is not None and y_elements.same_elements(x_elements)


def test_thunders_alias_pass_replacing_an_unrelated_input_is_reported_before_the_wrong_result() -> None:
    unused, y, x, a = _inputs()
    expected = _with_unused_first(*(t.clone() for t in (unused, y, x, a)))  # clones: no aliasing in eager
    right = torch.allclose(thunder.jit(_with_unused_first)(*_inputs()), expected)
    if right:  # a Thunder whose alias pass maps the groups to the right inputs: nothing to report
        with stc.audit() as log, installed(STRICT):
            thunder.jit(_with_unused_first)(*_inputs())
        assert log.violations == []
        return
    with installed(STRICT), pytest.raises(BrokenTraceError) as info:  # Thunder 0.2.6 and main
        thunder.jit(_with_unused_first)(unused, y, x, a)
    error: Any = info.value
    assert error.kind == "flat-args-mismatch" and error.names[:2] == ("a", "y")
    assert "insert_alias_updates" in str(error) and "do not share storage in this call" in str(error)


def test_inputs_that_share_storage_replaced_by_one_of_them_are_silent_and_right() -> None:
    _, y, x, a = _inputs()
    expected = _aliased_first(*(t.clone() for t in (y, x, a)))
    with stc.audit() as log, installed(STRICT):
        got = thunder.jit(_aliased_first)(y, x, a)
    assert log.violations == []
    torch.testing.assert_close(got, expected)


def test_the_compilation_keeps_no_tensor_of_the_call() -> None:
    big = torch.randn(64)
    alive = weakref.ref(big)
    with installed(STRICT):
        thunder.jit(lambda t: t * 2)(big)
        compilation = compilations._current.get()
        assert compilation is not None and compilation.call is not None
        del big
        gc.collect()
        assert alive() is None  # the call is kept as storages (ints), not as the user's tensors


def test_the_call_is_read_without_ever_raising() -> None:
    """No storage (vmap's BatchedTensor), a dict holding itself, a tensor subclass: None where Thunder never groups."""
    found: list[Any] = []

    def keep(t: torch.Tensor) -> torch.Tensor:
        found.append(call_storages((t,), {}))
        return t

    torch.vmap(keep)(torch.ones(3, 2))
    assert found == [((None,), {})]
    looped: dict[str, Any] = {"x": torch.ones(2)}
    looped["self"] = looped
    args, _ = call_storages((looped,), {})
    assert isinstance(args[0]["x"], Region) and args[0]["self"] is None
    assert call_storages((torch.ones(2).as_subclass(torch.nn.Parameter),), {}) == ((None,), {})


class _Cached(torch.nn.Module):
    """A cache-like module: an in-place update of one view of the cache, a weight read by attribute."""

    def __init__(self) -> None:
        super().__init__()
        self.w = torch.nn.Parameter(torch.randn(2, 2), requires_grad=False)

    def forward(self, unused: Any, y: Any, x: Any) -> Any:
        x.add_(1)
        return y @ self.w


def test_a_parameter_replaced_by_an_input_is_reported_it_is_never_in_an_alias_group() -> None:
    def inputs() -> tuple[Any, ...]:
        torch.manual_seed(0)
        x = torch.randn(2, 2)
        return x[0], x.view(2, 2), x

    torch.manual_seed(1)
    module = _Cached()
    expected = module(*(t.clone() for t in inputs()))
    right = torch.allclose(thunder.jit(module)(*inputs()), expected)
    with stc.audit() as log, installed("audit"):
        thunder.jit(module)(*inputs())
    if right:  # a Thunder whose alias pass keeps to the call's inputs
        assert log.violations == []
        return
    (violation,) = log.violations  # Thunder 0.2.6 and main replace the weight t_w by the input y
    assert violation.detail["kind"] == "flat-args-mismatch" and violation.detail["names"][0] == "t_w"
    assert "no plain tensor of the call's arguments" in violation.detail["message"]


@pytest.mark.parametrize(
    "make",
    [
        lambda base: (base.reshape(2, 3)[:, 0], base.reshape(2, 3)[:, 0].unsqueeze(1)),  # a strided view, unsqueezed
        lambda base: (base.reshape(2, 3)[:, 0:1], base.reshape(2, 3)[:, 0]),
        lambda base: (base.reshape(2, 3)[:, ::2].unsqueeze(0), base.reshape(2, 3)[:, ::2]),
        lambda base: (base[:1].expand(2), base[:1].expand(2, 1)),  # stride 0
        lambda base: (base[:0], base[2:2]),  # no elements at all
        lambda base: (base[:0], base[:0].reshape(0, 3).t()),
    ],
)
def test_views_that_are_a_reshape_of_each_other_are_the_same_elements(make: Any) -> None:
    """Thunder's alias pass replaces one by ``reshape`` of the other: right whenever both read the same elements in
    the same row-major order (a hostile review's false alarms, on programs Thunder runs right)."""
    (first, second), _ = call_storages(make(torch.arange(6.0)), {})
    assert first.same_elements(second) and second.same_elements(first)


def test_views_that_read_the_storage_otherwise_are_other_elements() -> None:
    """A dtype view or a conjugate view of the same storage: Thunder's reshape of one in the other's place computes
    with the wrong values (a hostile review's misses)."""
    a, c = torch.ones(4), torch.tensor([1 + 2j, 3 - 1j])
    (whole, as_int, as_short, conj, column), _ = call_storages(
        (a, a.view(torch.int32), a.view(torch.int16)[:4], c, c.conj()), {}
    )
    assert not whole.same_elements(as_int) and not whole.same_elements(as_short) and not conj.same_elements(column)
    assert "torch.int32" in as_int.describe() and "conjugate" in column.describe()
    assert not whole.same_elements(call_storages((a[::2],), {})[0][0])


def _update_first(a: Any, b: Any) -> Any:
    a.add_(1)
    return b * 1


def test_a_strided_view_and_its_unsqueeze_are_silent_and_right() -> None:
    def views() -> tuple[torch.Tensor, torch.Tensor]:
        x = torch.arange(6.0).reshape(2, 3)[:, 0]
        return x, x.unsqueeze(1)

    expected = _update_first(*views())
    with stc.audit() as log, installed(STRICT):
        got = thunder.jit(_update_first)(*views())
    assert log.violations == []
    torch.testing.assert_close(got, expected)


def test_a_dtype_view_replaced_by_its_storage_is_reported_before_the_wrong_result() -> None:
    a = torch.ones(4)
    with installed(STRICT), pytest.raises(BrokenTraceError) as info:
        thunder.jit(_update_first)(a, a.view(torch.int32))
    error: Any = info.value
    assert error.kind == "flat-args-mismatch" and set(error.names[:2]) == {"a", "b"}
    assert "torch.int32" in str(error) and torch.equal(a, torch.ones(4))  # raised before the update ran
