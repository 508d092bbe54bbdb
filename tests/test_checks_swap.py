"""stale-proxy-after-swap: a symbol that reads a name as another tensor (shape or dtype) than the one the name holds
(#1964's class: a pass swaps proxies and misses a use, a nested one), on traces of real thunder.jit compiles."""

from __future__ import annotations

import dataclasses
import warnings
from collections.abc import Callable
from typing import Any

import pytest
import torch
from thunder.core import prims
from thunder.core.devices import cpu
from thunder.core.dtypes import float32
from thunder.core.proxies import TensorProxy
from thunder.core.pytree import tree_map
from thunder.core.trace import TraceCtx, from_trace

import safe_tracectx as stc
from safe_tracectx import STRICT, BrokenTraceError, TraceContextWarning, tracectx
from safe_tracectx.hooks import installed
from safe_tracectx.traces.checks import check_trace, trace_findings

with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    import thunder
    from thunder.core.transform_common import Transform


def _concat(x: torch.Tensor, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    return x * torch.cat([a, b], 0)


def _inputs() -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    return torch.randn(4, 3), torch.randn(2, 3), torch.randn(2, 3)


def _computation() -> TraceCtx:
    """The computation trace of a real compile of ``x * torch.cat([a, b], 0)``, as the interpretation made it."""
    jitted = thunder.jit(_concat)
    jitted(*_inputs())
    trace: TraceCtx = thunder.last_traces(jitted)[0]
    assert [p.name for p in trace.args] == ["x", "a", "b"]
    return trace


def _swap_top_level(trace: TraceCtx, rows: int) -> tuple[TraceCtx, TensorProxy, TensorProxy]:
    """A pass as #1964's FSDP transform: the trace's input ``a`` becomes a new proxy of the same name with
    ``rows`` rows, swapped where it is a top-level positional argument only (the cat reads it inside a list).
    Also (the old proxy, the new one)."""
    old = next(p for p in trace.args if p.name == "a")
    with tracectx(TraceCtx()):  # another trace's namer: the name "a" is the trace's already
        new = TensorProxy("a", shape=(rows, 3), device=old.device, dtype=old.dtype)
    swapped = from_trace(trace)
    swapped.args = tuple(new if p is old else p for p in trace.args)
    for bsym in trace.bound_symbols:
        if bsym.sym is prims.unpack_trivial and bsym.output is old:
            swapped.bound_symbols.append(bsym.from_bsym(output=new))
        else:
            swapped.bound_symbols.append(bsym.from_bsym(args=tuple(new if a is old else a for a in bsym.args)))
    return swapped, old, new


def _cat_index(trace: TraceCtx) -> int:
    return next(i for i, b in enumerate(trace.bound_symbols) if b.sym.name == "cat")


def test_a_nested_use_the_swap_missed_reads_the_name_as_another_tensor() -> None:
    trace = _computation()
    assert check_trace(trace) == []
    swapped, old, new = _swap_top_level(trace, rows=1)
    cat = swapped.bound_symbols[_cat_index(swapped)]
    assert any(a is old for a in cat.args[0]) and not any(a is new for a in cat.args[0])  # the missed, nested use
    before = (tuple(map(id, swapped.bound_symbols)), frozenset(swapped.names), old.shape, new.shape)
    violations, notes = trace_findings(swapped)
    assert [(v.kind, v.name) for v in violations] == [("stale-proxy-after-swap", "a")] and notes == []
    (violation,) = violations
    assert violation.where == f"bound symbol {_cat_index(swapped)} (cat)"
    assert "reads a as f32[2, 3], but a is a parameter of the trace, f32[1, 3]" in violation.message
    error = violation.to_error()
    assert isinstance(error, BrokenTraceError) and error.names == ("a",) and "from_bsym_swap_proxies" in error.fix
    assert (tuple(map(id, swapped.bound_symbols)), frozenset(swapped.names), old.shape, new.shape) == before


def test_another_object_of_the_name_with_the_same_metadata_is_the_same_variable() -> None:
    swapped, old, new = _swap_top_level(_computation(), rows=2)
    assert new is not old and new.name == old.name
    assert trace_findings(swapped) == ([], [])


def test_strict_raises_it_at_the_pass_that_swapped() -> None:
    trace = _computation()
    with stc.audit() as log, installed(STRICT):
        with pytest.raises(BrokenTraceError, match="reads a as f32\\[2, 3\\], but a is a parameter") as info:
            with stc.audited_pass("my sharding pass", inputs=(trace,)) as audited:
                audited.outputs(_swap_top_level(trace, rows=1)[0])
    assert info.value.kind == "stale-proxy-after-swap" and info.value.names == ("a",)
    assert info.value.culprit is not None and info.value.culprit[0] == "my sharding pass"
    assert [v.detail["kind"] for v in log.violations] == ["stale-proxy-after-swap"]


class _ShardInPlace(Transform):
    """#1964's FSDP transform, in small: the computation trace's input ``a`` gets half its rows in place (and the
    prologue checks that shape, as the FSDP transform's does), and the symbols computed for it are carried over as
    they are (nothing swapped)."""

    def transform_traces_pre_prologue(
        self, prologue_trace: TraceCtx, computation_trace: TraceCtx, epilogue_trace: TraceCtx | None, **kwargs: Any
    ) -> tuple[TraceCtx, TraceCtx, TraceCtx | None]:
        for given, a in zip(prologue_trace.output[0], computation_trace.args):
            if a.name == "a":
                a._shape = given._shape = (1, 3)  # in place, as the FSDP transform shards a parameter
                for check in prologue_trace.bound_symbols:
                    if check.sym is prims.check_tensor_shape_and_metadata and check.args[0] is given:
                        check.args = (check.args[0], (1, 3), *check.args[2:])
        new = from_trace(computation_trace)
        new.bound_symbols = [b.from_bsym() for b in computation_trace.bound_symbols]
        return prologue_trace, new, epilogue_trace


def test_a_pass_that_changes_an_input_in_place_under_a_symbol_computed_for_it_is_reported_at_that_pass() -> None:
    jitted = thunder.jit(_concat, transforms=[_ShardInPlace()])
    with stc.audit() as log, installed(STRICT):
        with pytest.raises(BrokenTraceError, match="changed a, an input of the trace, in place from f32\\[2, 3\\] "
                           "to f32\\[1, 3\\], and bound symbol \\d+ \\(cat\\), computed before it") as info:
            jitted(*_inputs())
    assert info.value.kind == "stale-proxy-after-swap" and info.value.names == ("a",)
    assert info.value.culprit is not None and info.value.culprit[0] == "_ShardInPlace.transform_traces_pre_prologue"
    assert [v.detail["kind"] for v in log.violations] == ["stale-proxy-after-swap"]


def test_programs_that_swap_nothing_are_silent_under_strict() -> None:
    jitted = thunder.jit(_concat)
    x, a, b = (t.requires_grad_() for t in _inputs())
    with stc.audit() as log, installed(STRICT):
        actual = jitted(x, a, b)
        actual.sum().backward()
    torch.testing.assert_close(actual, _concat(x, a, b))
    assert log.violations == []


def test_plain_thunder_fails_on_it_and_the_check_takes_an_action_of_its_own() -> None:
    """Plain, the program fails (the prologue wants the shard, the symbols were computed for the whole tensor);
    ``stale_proxy_after_swap="warn"``: the finding is a warning, and Thunder goes on to the same failure."""
    failures = []
    for policy in (None, "warn"):
        jitted = thunder.jit(_concat, transforms=[_ShardInPlace()])
        with pytest.raises(Exception) as info:  # noqa: PT011 - Thunder's own error, whatever it is
            if policy is None:
                jitted(*_inputs())
            else:
                with installed(STRICT), stc.use_policy("strict", stale_proxy_after_swap=policy):
                    with pytest.warns(TraceContextWarning, match="changed a, an input of the trace, in place"):
                        jitted(*_inputs())
        failures.append(type(info.value))
    assert failures[0] is failures[1] and not issubclass(failures[0], BrokenTraceError)


def _to_half(x: torch.Tensor) -> torch.Tensor:
    return x.to(torch.float16).t()


def _retyped_outputs(dtype: Any, *, subsymbols_too: bool, symbols: tuple[str, ...] = ("to", "t"),
                     **jit_options: Any) -> tuple[TraceCtx, list[str]]:
    """#1628's class: a pass gives the outputs of ``symbols`` (of the last trace of a compile of ``_to_half``) new
    proxies of ``dtype`` (same names), and, unless ``subsymbols_too``, leaves the old proxies as the outputs of
    their subsymbols. Also the retyped names."""
    jitted = thunder.jit(_to_half, **jit_options)
    jitted(torch.randn(3, 4))
    trace: TraceCtx = thunder.last_traces(jitted)[-1 if "executors" in jit_options else 0]
    assert check_trace(trace) == []
    new_trace = from_trace(trace)
    renamed: dict[int, TensorProxy] = {}
    with tracectx(TraceCtx()):  # another trace's namer: the names are the trace's already
        for bsym in trace.bound_symbols:
            if bsym.sym.name in symbols or any(getattr(bsym.sym, "name", "").startswith(n) for n in symbols):
                for old in bsym.flat_proxy_outs:
                    assert isinstance(old, TensorProxy)
                    renamed[id(old)] = TensorProxy(old.name, like=old, dtype=dtype)

    def swap(value: Any) -> Any:
        return tree_map(lambda leaf: renamed.get(id(leaf), leaf), value)

    for bsym in trace.bound_symbols:
        subsymbols = bsym.subsymbols
        if subsymbols_too:
            subsymbols = [s.from_bsym(args=tuple(map(swap, s.args)), output=swap(s.output)) for s in subsymbols]
        new_trace.bound_symbols.append(
            bsym.from_bsym(args=tuple(map(swap, bsym.args)), output=swap(bsym.output), subsymbols=subsymbols)
        )
    return new_trace, [p.name for p in renamed.values()]


def test_a_subsymbol_computing_its_symbols_output_as_another_tensor_is_reported() -> None:
    """#1628: the symbol says y is bf16, its decomposition (what a fusion runs) computes y as f16."""
    trace, names = _retyped_outputs(thunder.dtypes.bfloat16, subsymbols_too=False)
    before = (tuple(map(id, trace.bound_symbols)), frozenset(trace.names))
    violations, notes = trace_findings(trace)
    assert sorted((v.kind, v.name) for v in violations) == sorted(("stale-proxy-after-swap", n) for n in names)
    assert notes == []
    to = next(v for v in violations if v.where.endswith("(to)"))
    assert f"outputs {to.name} as bf16[3, 4], but its subsymbol 0 (convert_element_type) records {to.name} as " \
           "f16[3, 4]" in to.message
    assert "missed its subsymbols" in to.message
    assert (tuple(map(id, trace.bound_symbols)), frozenset(trace.names)) == before


def test_subsymbols_given_the_new_proxies_or_the_same_tensor_again_are_not_reported() -> None:
    fixed, _ = _retyped_outputs(thunder.dtypes.bfloat16, subsymbols_too=True)  # the fix: the subsymbols follow
    assert check_trace(fixed) == []
    same, _ = _retyped_outputs(thunder.dtypes.float16, subsymbols_too=False)  # other objects, the same tensor
    assert check_trace(same) == []


def test_strict_raises_it_at_the_pass_that_left_the_subsymbols() -> None:
    trace, names = _retyped_outputs(thunder.dtypes.bfloat16, subsymbols_too=False)
    with stc.audit() as log, installed(STRICT):
        with pytest.raises(BrokenTraceError, match="records .* as f16") as info:
            with stc.audited_pass("my dtype policy") as audited:
                audited.outputs(trace)
    assert info.value.kind == "stale-proxy-after-swap" and info.value.names[0] in names
    assert info.value.culprit is not None and info.value.culprit[0] == "my dtype policy"
    assert {v.detail["kind"] for v in log.violations} == {"stale-proxy-after-swap"}


def test_a_fusion_regions_own_symbol_recording_its_output_as_another_tensor_is_reported() -> None:
    """A region's subsymbols are the code the fusion runs: its output recorded as bf16 above, f16 inside."""
    from thunder.executors.torch_compile import torch_compile_ex

    trace, names = _retyped_outputs(thunder.dtypes.bfloat16, subsymbols_too=False, symbols=("TorchCompile",),
                                    executors=[torch_compile_ex])
    violations, _ = trace_findings(trace)
    assert names and {(v.kind, v.name) for v in violations} >= {("stale-proxy-after-swap", names[0])}
    assert any("records" in v.message and "TorchCompile" in v.where for v in violations)


def test_under_symbolic_values_the_dtype_is_compared() -> None:
    """Symbolic dimensions are never compared (that would record symbols); the dtype and device always are."""
    trace, names = _retyped_outputs(thunder.dtypes.bfloat16, subsymbols_too=False, cache="symbolic values")
    violations, _ = trace_findings(trace)
    assert sorted(v.name for v in violations if v.kind == "stale-proxy-after-swap") == sorted(names)
    assert any("records" in v.message and "f16 on cpu" in v.message for v in violations)
    fixed, _ = _retyped_outputs(thunder.dtypes.bfloat16, subsymbols_too=True, cache="symbolic values")
    assert check_trace(fixed) == []


def _plus_own_sum(x: torch.Tensor) -> torch.Tensor:
    return x + x.sum()


def _plus_scaled_scalar(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    return x + y * 2


def test_the_gradient_of_a_0_dim_value_swapped_for_a_full_shape_one_is_reported_at_the_grad_transform() -> None:
    """Thunder 0.2.6 and main: in ``x + x.sum()`` the grad rule of add gives the 0-dim ``x.sum()`` the cotangent of
    the sum's full shape, and the grad transform swaps it in for the gradient sum's rule broadcasts as 0-dim: the
    broadcast reads a [3, 4] tensor with the broadcast dimensions of a 0-dim one, and x's gradient comes out 2
    where eager PyTorch gives 13 (a wrong result, no error)."""
    x = torch.randn(3, 4, requires_grad=True)
    with stc.audit() as log, installed(STRICT):
        with pytest.raises(BrokenTraceError, match="was made for a 0-dimensional tensor and reads t") as info:
            thunder.jit(_plus_own_sum)(x).sum().backward()
    assert info.value.kind == "stale-proxy-after-swap"
    assert info.value.culprit is not None and info.value.culprit[0] == "autodiff grad transform"
    assert [v.detail["kind"] for v in log.violations] == ["stale-proxy-after-swap"]


def test_a_cpu_scalar_inputs_full_shape_gradient_is_not_reported() -> None:
    """The same convention where it is right: ``y * 2`` of a 0-dim input y gets a full-shape gradient through
    elementwise rules, and torch autograd sums it back for the input."""
    x, y = torch.randn(3, 4, requires_grad=True), torch.tensor(0.7, requires_grad=True)
    with stc.audit() as log, installed(STRICT):
        thunder.jit(_plus_scaled_scalar)(x, y).sum().backward()
    assert log.violations == []
    assert y.grad is not None and torch.allclose(y.grad, torch.tensor(24.0))


def test_an_elementwise_prim_reading_a_tensor_of_another_shape_than_its_output() -> None:
    from safe_tracectx.traces.swaps import made_for_another_shape

    with tracectx(TraceCtx()):
        a = TensorProxy("a", shape=(3, 4), device=cpu, dtype=thunder.dtypes.float32)
        b = TensorProxy("b", shape=(2, 4), device=cpu, dtype=thunder.dtypes.float32)
        s = TensorProxy("s", shape=(), device=cpu, dtype=thunder.dtypes.float32)
        out = TensorProxy("out", shape=(3, 4), device=cpu, dtype=thunder.dtypes.float32)
        scalar_out = TensorProxy("o", shape=(), device=cpu, dtype=thunder.dtypes.float32)
    found = made_for_another_shape(prims.add.bind(a, b, output=out))
    assert found is not None and found[0] is b and "f32[3, 4]" in found[1]
    assert made_for_another_shape(prims.add.bind(a, s, output=out)) is None  # a CPU scalar tensor broadcasts
    assert made_for_another_shape(prims.add.bind(a, a, output=out)) is None
    assert made_for_another_shape(prims.neg.bind(a, output=scalar_out)) is None  # a CPU scalar's gradient convention
    assert made_for_another_shape(prims.transpose.bind(a, (1, 0), output=out)) is None  # not elementwise


_LAZY_CASES: dict[str, tuple[Callable[[torch.Tensor, torch.Tensor], torch.Tensor], bool]] = {
    # program -> (the function, wrong on Thunder 0.2.6 and main?)
    "x + x.sum() * 2": (lambda x, y: x + x.sum() * 2, True),
    "x * x.pow(2).sum().rsqrt()": (lambda x, y: x * x.pow(2).sum().rsqrt(), True),
    "(x * y).sum() + y": (lambda x, y: (x * y).sum() + y, True),
    "x * y.clamp(0, 1)": (lambda x, y: x * y.clamp(0, 1), False),
    "x * y + y": (lambda x, y: x * y + y, False),
    "(x * y).sum() * 3": (lambda x, y: (x * y).sum() * 3, False),
}


@pytest.mark.parametrize("program", list(_LAZY_CASES))
def test_a_full_shape_gradient_standing_for_a_0_dim_ones_sum_is_reported_where_only_its_sum_is_right(
    program: str,
) -> None:
    """finding 12, beyond the first read: through elementwise prims (x.sum() * 2, a global norm's rsqrt) to the rule
    that broadcasts it, and added to a 0-dim gradient for a 0-dim input (summed back by torch autograd, that value
    counts once per element: (x * y).sum() + y gives y x.sum() + 12 where eager PyTorch gives x.sum() + 1). The same
    convention where it is right (a clamp's where selecting it or 0, scaling, adding two such gradients) is silent."""
    function, wrong = _LAZY_CASES[program]
    x, y = torch.randn(3, 4, requires_grad=True), torch.tensor(0.7, requires_grad=True)
    with stc.audit() as log, installed(STRICT):
        if wrong:
            with pytest.raises(BrokenTraceError, match="stands for its sum|was made for a 0-dimensional") as info:
                thunder.jit(function)(x, y).sum().backward()
            assert info.value.kind == "stale-proxy-after-swap"
        else:
            thunder.jit(function)(x, y).sum().backward()
    assert bool(log.violations) is wrong
    if not wrong:
        ex, ey = x.detach().clone().requires_grad_(), y.detach().clone().requires_grad_()
        function(ex, ey).sum().backward()  # type: ignore[no-untyped-call]
        assert x.grad is not None and y.grad is not None and ey.grad is not None
        assert torch.allclose(y.grad, ey.grad)


def test_a_one_element_tensor_broadcast_with_another_rank_is_not_reported() -> None:
    """x of one element: sum's rule broadcasting its full-shape gradient as if it were 0-dim gives the same values."""
    x = torch.randn(1, requires_grad=True)
    with stc.audit() as log, installed(STRICT):
        thunder.jit(_plus_own_sum)(x).sum().backward()
    assert log.violations == []
    assert x.grad is not None and torch.allclose(x.grad, torch.tensor([2.0]))


def test_elementwise_is_read_from_the_meta_and_cached_by_prim_id_never_by_address() -> None:
    from thunder.core import prims
    from thunder.core.symbol import Symbol

    from safe_tracectx.traces import swaps

    own = Symbol(name="own_add", meta=prims.add.meta, id="own_add")  # a symbol of the user's with an elementwise meta
    assert swaps.is_elementwise(prims.add) and swaps.is_elementwise(own)
    assert not swaps.is_elementwise(prims.transpose) and not swaps.is_elementwise(None)
    # a freed symbol's address is another symbol's later: only prims are cached, by their PrimIDs member
    assert swaps._ELEMENTWISE and all(isinstance(key, prims.PrimIDs) for key in swaps._ELEMENTWISE)

    def wrapped_meta(a: Any, b: Any) -> Any:  # a user's copy of add under add's PrimIDs member, its meta wrapped
        return prims.add.meta(a, b)

    copy = dataclasses.replace(prims.add, name="my_add", meta=wrapped_meta)
    assert not swaps.is_elementwise(copy)
    assert swaps.is_elementwise(prims.add)  # the copy's answer is its own, not the prim's


def _one_subsymbol_trace(top_output: Any, sub: Any) -> Any:
    from thunder.core import prims
    from thunder.core.trace import TraceCtx

    trace = TraceCtx()
    trace.args = tuple(p for p in sub.args if isinstance(p, TensorProxy))
    top = prims.convert_element_type.bind(trace.args[0], float32, output=top_output) if top_output is not None else \
        prims.python_print.bind(trace.args[0], output=None)
    top.subsymbols = [sub]
    trace.bound_symbols += [top, prims.python_return.bind(top_output, output=None)]
    return trace


def test_a_decomposition_is_read_through_the_outputs_every_check_reads() -> None:
    # a pass set a subsymbol's output in place after Thunder cached its flat_proxy_outs: the decomposition check
    # reads what proxy_outs (every other check) reads, the cache, not the new output
    from thunder.core import dtypes, prims
    from thunder.core.trace import TraceCtx

    from safe_tracectx.traces.checks import trace_findings

    with stc.tracectx(TraceCtx()):
        a = TensorProxy("a", shape=(2,), device=cpu, dtype=float32)
        b16 = TensorProxy("b", shape=(2,), device=cpu, dtype=dtypes.float16)
    with stc.tracectx(TraceCtx()):
        b32 = TensorProxy("b", shape=(2,), device=cpu, dtype=float32)
    for cached, now, reported in ((b16, b32, True), (b32, b16, False)):
        sub = prims.convert_element_type.bind(a, cached.dtype, output=cached)
        assert sub.flat_proxy_outs == (cached,)  # Thunder read it
        sub.output, sub.args = now, (a, now.dtype)
        found = [(v.kind, v.name) for v in trace_findings(_one_subsymbol_trace(b32, sub))[0]]
        assert (("stale-proxy-after-swap", "b") in found) is reported


def test_an_unreadable_subsymbol_of_a_symbol_without_outputs_raises_as_thunder_does() -> None:
    from thunder.core import prims
    from thunder.core.symbol import BoundSymbol
    from thunder.core.trace import TraceCtx

    from safe_tracectx.traces.checks import trace_findings

    with stc.tracectx(TraceCtx()):
        a = TensorProxy("a", shape=(2,), device=cpu, dtype=float32)
    sub = BoundSymbol(prims.neg, args=(a,), kwargs={}, output={1, 2})  # a set: Thunder's tree_flatten refuses it
    with pytest.raises(TypeError, match="tree_flatten of type"):
        trace_findings(_one_subsymbol_trace(None, sub))
