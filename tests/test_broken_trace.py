"""A pass that breaks its trace (a use before definition): strict stops there, with the error its program would raise.

The error is an ``UnboundLocalError`` (what the generated program raises when
it runs), raised at the pass that made the trace. With Thunder's own
``DebugOptions(check_traces=True)`` on, Thunder rejects the trace itself and we
only record it. The Transform is the one of Thunder's
``test_check_trace.py::test_debug_option``, which must have the same outcome
plain and under ``--safe-tracectx=strict``.
"""

from __future__ import annotations

import os
import warnings
from typing import Any

import pytest
import torch
from thunder.core.trace import TraceCtx, from_trace
from thunder.core.transform_common import Transform

import safe_tracectx as stc
from safe_tracectx import LENIENT, STRICT, BrokenTraceError, NameClashError, TraceContextWarning
from safe_tracectx.hooks import installed
from safe_tracectx.traces.checks import Violation, ViolationKind

with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    import thunder


class BrokenTransform(Transform):
    def transform_traces_pre_prologue(
        self, prologue_trace: TraceCtx, computation_trace: TraceCtx, epilogue_trace: TraceCtx | None, **kwargs: Any
    ) -> tuple[TraceCtx, TraceCtx, TraceCtx | None]:
        new_comp = from_trace(computation_trace)
        new_comp.bound_symbols = computation_trace.bound_symbols[:]
        del new_comp.bound_symbols[2]  # c = a + b: c is then used before any definition
        return prologue_trace, new_comp, epilogue_trace


def fn(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    c = a + b
    return 2 * c


def _args() -> tuple[torch.Tensor, torch.Tensor]:
    return torch.randn(2, 2), torch.randn(2, 2)


def test_strict_raises_a_broken_trace_as_the_error_its_program_would_raise() -> None:
    assert (STRICT.broken_trace, LENIENT.broken_trace) == ("raise", "warn")
    broken = Violation("use-before-definition", "c", "c is used before any bound symbol defines it", "bound symbol 2")
    error = broken.to_error()
    assert isinstance(error, BrokenTraceError) and isinstance(error, UnboundLocalError)
    kinds: tuple[ViolationKind, ...] = ("defined-twice", "unregistered-name", "borrowed-namer", "name-taken")
    for kind in kinds:
        assert type(Violation(kind, "c", "m", "w").to_error()) is NameClashError, kind


def test_with_thunders_own_trace_checker_on_it_is_thunder_that_raises() -> None:
    debug = thunder.DebugOptions(check_traces=True)  # type: ignore[no-untyped-call]
    jitted = thunder.jit(fn, transforms=[BrokenTransform()], debug_options=debug)
    with stc.audit() as log, installed(STRICT):
        with pytest.raises(AssertionError, match="unknown proxy"):
            jitted(*_args())
    (violation,) = log.violations
    assert (violation.detail["code"], violation.detail["check"], violation.detail["action"]) == (
        "UseBeforeDefinitionError", "broken_trace", "left to Thunder's check_traces"
    )
    assert violation.detail["culprit"].startswith("BrokenTransform.transform_traces_pre_prologue")
    assert violation.pass_name == "BrokenTransform.transform_traces_pre_prologue"


def test_strict_stops_at_the_pass_that_broke_the_trace_with_the_error_the_program_would_raise() -> None:
    jitted = thunder.jit(fn, transforms=[BrokenTransform()], executors=())
    with installed(STRICT), pytest.raises(UnboundLocalError, match="cannot access local") as info:
        jitted(*_args())
    assert isinstance(info.value, BrokenTraceError)
    assert "BrokenTransform.transform_traces_pre_prologue" in str(info.value)
    assert "c is used before any bound symbol defines it" in str(info.value)
    assert info.value.names == ("c",) and info.value.kind == "use-before-definition"


def test_one_check_can_be_given_another_action() -> None:
    jitted = thunder.jit(fn, transforms=[BrokenTransform()], executors=())
    with installed(STRICT), stc.use_policy("strict", use_before_definition="warn"):
        with pytest.warns(TraceContextWarning, match="c is used before"):
            with pytest.raises(UnboundLocalError, match="cannot access local|referenced before assignment") as info:
                jitted(*_args())
    assert not isinstance(info.value, BrokenTraceError)  # Thunder's own failure, as plain


def test_thunders_test_debug_option_passes_plain_strict_and_audit(pytester: pytest.Pytester) -> None:
    tests_dir = os.path.dirname(thunder.__file__) + "/tests"
    test = f"{tests_dir}/test_check_trace.py::test_debug_option"
    for mode in ((), ("--safe-tracectx=strict",), ("--safe-tracectx=audit",)):
        result = pytester.runpytest_subprocess(
            *mode, "-p", "no:cacheprovider", "-c", os.devnull, f"--rootdir={tests_dir}", test
        )
        assert result.parseoutcomes().get("passed") == 1, (mode, result.stdout.str()[-2000:])


def _rebuilt_without_names(trace: TraceCtx, *, registered: bool = False) -> TraceCtx:
    """A trace holding ``trace``'s bound symbols that registers only its arguments' names, as #1545's region trace
    did (``registered``: every name its symbols use, as the fix does)."""
    rebuilt = TraceCtx(None)
    rebuilt.args, rebuilt.kwargs = trace.args, {}
    rebuilt.bound_symbols = list(trace.bound_symbols)
    names = {p.name for b in trace.bound_symbols for p in (*b.flat_proxy_outs, *b.flat_proxy_args)}
    for name in names if registered else {p.name for p in trace.args}:
        rebuilt.add_name(name)
    return rebuilt


def _plus_one_twice(a: torch.Tensor) -> torch.Tensor:
    return (a + 1) * 2  # no local names: the trace's values are t0, t1


@pytest.mark.parametrize("registered", [False, True])
def test_a_fresh_name_the_given_trace_already_uses_is_a_clash_charged_to_its_maker(registered: bool) -> None:
    """Thunder's namer hands out t0 while the trace the pass was given already uses t0 unregistered: two values,
    one name (the #1545 class). Registered, the namer skips it and nothing is said."""
    from thunder.core.proxies import TensorProxy
    from thunder.core.trace import tracectx

    from safe_tracectx.hooks import compilation as compilations

    jitted = thunder.jit(_plus_one_twice)
    jitted(torch.randn(2))
    computation = thunder.last_traces(jitted)[0]
    assert any(p.name == "t0" for b in computation.bound_symbols for p in b.flat_proxy_outs)

    @stc.audited_pass("relabel")
    def relabel(trace: TraceCtx) -> str:
        new = from_trace(trace)  # shares trace's names set, as Thunder's passes do
        with tracectx(new):
            return TensorProxy(like=trace.args[0]).name  # named by the namer: the first free t<N>

    with installed(STRICT):
        compilations.start().add(computation)
        given = _rebuilt_without_names(computation, registered=registered)  # made while installed: a step
        if registered:
            assert relabel(given) not in {p.name for b in computation.bound_symbols for p in b.flat_proxy_outs}
            return
        with pytest.raises(NameClashError, match=r"namer gave a new proxy the name t0, which .* already uses t0|"
                           r"namer gave a new proxy the name t0, which .* already uses in") as info:
            relabel(given)
    error = info.value
    assert error.kind == "name-taken" and error.names == ("t0",)
    assert error.culprit is not None and error.culprit[1].endswith("_rebuilt_without_names")
    assert "t0 first appears unregistered in the trace made by" in error.message



def _folded() -> tuple[torch.Tensor, torch.Tensor]:
    const_t = torch.tensor([2])
    getitem = (const_t * 2)[0]  # getitem's subsymbol slice_prim outputs t2, a name the folded trace leaves unregistered
    return getitem, const_t


@pytest.fixture
def swap_unsafe(monkeypatch: pytest.MonkeyPatch) -> Any:
    """Thunder's swap as before #1545's era ended: a proxy replaced by one of its own name is a cycle."""
    from thunder.core.symbol import BoundSymbol

    from safe_tracectx.traces import swaps

    def refusing(self: Any, swap_map: dict[Any, Any], **kwargs: Any) -> Any:
        raise RuntimeError("Detected a cycle while swapping; the cycle includes {a}")

    swaps.same_name_swap_is_safe.cache_clear()
    monkeypatch.setattr(BoundSymbol, "from_bsym_swap_proxies", refusing)
    assert swaps.same_name_swap_is_safe() is False
    monkeypatch.undo()
    yield
    swaps.same_name_swap_is_safe.cache_clear()


def test_thunder_is_asked_whether_a_same_named_replacement_is_one_variable() -> None:
    from safe_tracectx.traces.swaps import same_name_swap_is_safe

    same_name_swap_is_safe.cache_clear()
    assert same_name_swap_is_safe() is True  # Thunder 0.2.6 and main: `if swap_map[vfa] is fa: break`


def test_a_subsymbol_name_given_again_to_its_replacement_is_no_clash_where_the_swap_takes_it() -> None:
    """Thunder's own test_constant_folding: the operator executors run getitem's slice_prim again, and the namer
    names its new output t2, the unregistered name of the output it replaces. Thunder's swap takes the two for one
    variable, and the program is right: strict says nothing."""
    from thunder.transforms.constant_folding import ConstantFolding

    jitted = thunder.jit(_folded, transforms=[ConstantFolding()])
    with stc.audit() as log, installed(STRICT):
        getitem, const_t = jitted()
    assert log.violations == []
    assert int(getitem) == 4 and const_t.tolist() == [2]


def test_where_thunders_swap_refuses_a_same_named_replacement_the_subsymbol_name_given_again_is_a_clash(
    swap_unsafe: Any,
) -> None:
    """The same program where the swap would fail on it (#1545's cycle): the fresh t2 is reported before."""
    from thunder.transforms.constant_folding import ConstantFolding

    jitted = thunder.jit(_folded, transforms=[ConstantFolding()])
    with installed(STRICT), pytest.raises(NameClashError, match=r"name t2, which .* subsymbol 0 \(slice_prim\)"):
        jitted()


class _ReverseSaved(Transform):
    """Reverses the order the forward saves its tensors for the backward (the backward untouched): the gradients
    would be assigned to the wrong values. ``nested``: compiles and runs another jitted function first."""

    def __init__(self, nested: bool = False) -> None:
        self.nested = nested

    def transform_trace_post_optimization(self, computation_trace: TraceCtx, **kwargs: Any) -> TraceCtx:
        trace = computation_trace
        if trace.siginfo().name == "backward_fn":
            return trace
        if self.nested:
            inner = thunder.jit(lambda t: (t.cos() * t).sum())
            inner(torch.randn(3, requires_grad=True)).backward()
        ret = trace.bound_symbols[-1]
        out, (saved, others) = ret.args[0], ret.args[1]
        new = from_trace(trace)
        new.bound_symbols = [*trace.bound_symbols[:-1], ret.from_bsym(args=(out, (tuple(reversed(saved)), others)))]
        return new


@pytest.mark.parametrize("nested", [False, True])
def test_a_broken_hand_over_is_charged_to_its_transform_also_with_a_compile_inside_it(nested: bool) -> None:
    """A jit compiled and run inside a Transform ends its own compilation only: the outer one is current again."""
    def f(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        return (x.sin() * y).sum()

    jitted = thunder.jit(f, transforms=[_ReverseSaved(nested)])
    x, y = torch.ones(3, requires_grad=True), torch.full((3,), 2.0, requires_grad=True)
    with installed(STRICT), pytest.raises(BrokenTraceError, match="of the saved tensors is named") as info:
        jitted(x, y).backward()
    assert info.value.kind == "handover-mismatch"
    assert info.value.culprit is not None and info.value.culprit[0] == "_ReverseSaved.transform_trace_post_optimization"


def test_a_running_compilation_keeps_its_steps_traces_until_it_ends() -> None:
    """A pass's intermediate trace, dropped by the next pass, may be where a defect began: the culprit search
    still reads every trace a pass read or returned while the compilation runs; once it ends, nothing is kept."""
    import gc
    import weakref

    from thunder.core.trace import TraceCtx

    from safe_tracectx.hooks import compilation as compilations

    with installed(STRICT):
        compilation = compilations.start()
        trace, scratch = TraceCtx(), TraceCtx()
        for made in (trace, scratch):
            compilation.record_step(made, "my step", "tests.my_step", within=None)
        compilation.add(trace)  # a pass returned it
        alive, gone = weakref.ref(trace), weakref.ref(scratch)
        del trace, scratch, made
        gc.collect()
        assert alive() is not None and compilation.step_of(alive()) is not None
        assert gone() is None  # a trace no pass read or returned lives as long as Thunder keeps it
    gc.collect()  # the last uninstall ended the compilation
    assert alive() is None and compilation.steps[0].ref() is None


def test_compiles_in_a_loop_keep_at_most_the_last_compilations_traces() -> None:
    """The next call of Thunder's jitted function may get the frame address of the call that ended: the ended
    compilation is let go when the next one starts there, not kept as an outer one with its traces."""
    import gc

    from safe_tracectx.hooks import compilation as compilations

    seen = []
    with installed(STRICT):
        for size in range(1, 6):
            jitted = thunder.jit(lambda x: torch.nn.functional.gelu(x * 2).sum())
            jitted(torch.randn(size, 3, requires_grad=True)).backward()
            seen.append(compilations._current.get())
            del jitted
            gc.collect()
        chain, compilation = 0, compilations._current.get()
        while compilation is not None:
            chain, compilation = chain + 1, compilation.outer
        assert chain <= 1
        assert [c._kept for c in seen[:-1] if c is not None] == [None] * 4


def test_a_finished_compilation_keeps_nothing_of_its_call_alive() -> None:
    """After the jitted call returns, its compilation holds no frame: the call's arguments are freed."""
    import gc
    import weakref

    from safe_tracectx.hooks import compilation as compilations

    jitted = thunder.jit(lambda x: (x * 2).sum())
    with installed(STRICT):
        big = torch.randn(300, 300, requires_grad=True)
        alive = weakref.ref(big)
        jitted(big).backward()
        del big
        for _ in range(2):
            jitted(torch.randn(300, 300, requires_grad=True)).backward()  # cached: no compilation runs
        gc.collect()
        assert alive() is None
        assert compilations.current() is None  # ended when its call returned


def test_a_working_mlp_with_torch_compile_ex_and_a_backward_passes_strict() -> None:
    """Its joint trace has the backward region recompute GELU's intermediates under their forward names (Thunder
    0.2.6): no fusion-name-clash, as the program computes what eager PyTorch does."""
    from thunder.executors.torch_compile import torch_compile_ex

    torch.manual_seed(0)
    mlp = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.GELU(), torch.nn.Linear(16, 8))
    x = torch.randn(4, 8, requires_grad=True)
    mlp(x).sum().backward()
    expected, x.grad = x.grad, None
    jitted = thunder.jit(mlp, executors=[torch_compile_ex, *thunder.get_default_executors()])
    with stc.audit() as log, installed(STRICT):
        jitted(x).sum().backward()
    assert log.violations == []
    torch.testing.assert_close(x.grad, expected)
