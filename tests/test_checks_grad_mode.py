"""detached-under-grad: a symbol called with grad enabled whose output carries DETACHED_AUTOGRAD_GRAPH (#1620's class:
a torch.no_grad() region inside a higher-order function's forward leaked the tag), on real thunder.jit compiles."""

from __future__ import annotations

import warnings
from typing import Any

import pytest
import torch
from thunder.core.proxies import ProxyTag
from thunder.core.trace import TraceCtx

import safe_tracectx as stc
from safe_tracectx import STRICT, BrokenTraceError
from safe_tracectx.hooks import installed
from safe_tracectx.policy import AUDIT
from safe_tracectx.traces.grad_mode import detached_under_grad

with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    import thunder
    import thunder.torch as ltorch

_LOOKASIDE = "_general_jit_torch_ops_higher_order_autograd_function_apply"


def _forward(ctx: Any, x: torch.Tensor) -> tuple[torch.Tensor, tuple[torch.Tensor, ...]]:
    with torch.no_grad():
        sin = torch.sin(x)
    return sin, (x,)


def _backward(ctx: Any, grad: torch.Tensor, *saved: torch.Tensor) -> torch.Tensor:
    return grad * 2


def _my_sin(x: torch.Tensor) -> torch.Tensor:
    """Thunder's own regression test of #1620: a forward with a no_grad region, through the higher-order op."""
    return torch.ops.higher_order.autograd_function_apply(  # type: ignore[no-any-return]
        _forward, _backward, x, args_tensor_mask=[True], non_differentiable_idx=[]
    )


@pytest.fixture
def unfixed(monkeypatch: pytest.MonkeyPatch) -> None:
    """Thunder before #1620's fix: the lookaside calls the forward as it is, its output keeps the tag."""
    monkeypatch.setattr(ltorch, "call_higher_order_function_and_consider_outer_autograd_setting", lambda fn: fn)


def _x() -> torch.Tensor:
    return torch.randn(2, 2, requires_grad=True)


@pytest.mark.usefixtures("unfixed")
def test_the_leaked_tag_is_raised_under_strict_with_the_output_the_symbol_and_the_lookaside() -> None:
    jitted = thunder.jit(_my_sin)
    with stc.audit() as log, installed(STRICT):
        with pytest.raises(BrokenTraceError, match="is called with grad enabled, but its output t5 carries "
                           "ProxyTag.DETACHED_AUTOGRAD_GRAPH") as info:
            jitted(_x())
    error = info.value
    assert error.kind == "detached-under-grad" and error.names == ("t5",)
    assert "bound symbol 1 (higher_order_autograd_function_apply_" in error.message
    assert "the gradient of t5 is lost" in error.message and "it first appears in the trace made by" in error.message
    assert error.message.startswith("interpretation/tracing")
    assert error.culprit is not None and error.culprit[1] == f"thunder.core.jit_ext.{_LOOKASIDE}.<locals>.forward"
    assert "call_higher_order_function_and_consider_outer_autograd_setting" in error.fix
    assert [(v.detail["kind"], v.detail["names"]) for v in log.violations] == [("detached-under-grad", ["t5"])]


def _my_sin_named(x: torch.Tensor) -> torch.Tensor:
    res: torch.Tensor = _my_sin(x)
    return res


@pytest.mark.usefixtures("unfixed")
def test_the_output_is_named_as_the_interpretation_first_made_it_and_as_the_user_named_it() -> None:
    """The interpretation renames its trace's proxies after the user's variables: t5 becomes res."""
    jitted = thunder.jit(_my_sin_named)
    with stc.audit() as log, installed(STRICT):
        with pytest.raises(BrokenTraceError, match="its output t5 \\(named res in a later trace of the step\\) carries") as info:
            jitted(_x())
    assert info.value.names == ("t5", "res") and "first appears in the trace made by thunder_general_jit" in str(
        info.value)
    assert [v.detail["names"] for v in log.violations] == [["t5", "res"]]


@pytest.mark.usefixtures("unfixed")
def test_the_audit_mode_reports_it_and_thunder_computes_a_result_with_no_grad() -> None:
    jitted = thunder.jit(_my_sin)
    with stc.audit() as log, installed(AUDIT):
        out = jitted(_x())
    assert out.requires_grad is False  # what the bug does: the program computes something else
    (violation,) = log.violations
    assert violation.detail["kind"] == "detached-under-grad" and violation.detail["names"] == ["t5"]
    assert _LOOKASIDE in str(violation.detail["culprit"])


def test_the_fixed_lookaside_is_silent_and_the_backward_runs() -> None:
    jitted = thunder.jit(_my_sin)
    x = _x()
    with stc.audit() as log, installed(STRICT):
        out = jitted(x)
        grad = torch.rand_like(out)
        out.backward(grad)
    torch.testing.assert_close(x.grad, grad * 2)
    assert log.violations == []


def _regions(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    y = x * w
    with torch.no_grad():
        z = y.sin()
        with torch.enable_grad():  # type: ignore[no-untyped-call]
            q = z * w
    torch.set_grad_enabled(False)
    r = q + 1
    torch.set_grad_enabled(True)
    return y + z + r


def _first(jitted: Any) -> TraceCtx:
    trace: TraceCtx = thunder.last_traces(jitted)[0]
    return trace


def _tagged(trace: TraceCtx) -> list[str]:
    return [p.name for b in trace.bound_symbols for p in b.flat_outs
            if ProxyTag.DETACHED_AUTOGRAD_GRAPH in getattr(p, "tags", ())]


def test_user_grad_mode_regions_are_followed_by_the_markers() -> None:
    jitted = thunder.jit(_regions)
    x, w = _x(), torch.randn(2, 2, requires_grad=True)
    with stc.audit() as log, installed(STRICT):
        actual = jitted(x, w)
        actual.sum().backward()
    assert log.violations == []
    expected_x, expected_w = x.grad, w.grad
    x.grad = w.grad = None
    _regions(x, w).sum().backward()  # type: ignore[no-untyped-call]
    torch.testing.assert_close((expected_x, expected_w), (x.grad, w.grad))
    first = _first(jitted)
    assert _tagged(first) == ["z", "r"]  # computed with grad disabled, between the markers: the tag is right there
    assert detached_under_grad(first, grad_enabled=True) == []
    # With the markers removed ("Remove context manager prims") the regions cannot be followed: that trace would
    # look like the bug, which is why only the interpretation's trace is judged.
    removed = next(t for t in thunder.last_traces(jitted)
                   if not any(b.sym.id == "set_grad_enabled" for b in t.bound_symbols))
    assert [v.name for v in detached_under_grad(removed, grad_enabled=True)] == ["z", "r"]


def _plain(x: torch.Tensor) -> torch.Tensor:
    return x.sin() * 2


def test_a_jit_called_under_no_grad_is_silent_and_the_mode_of_the_call_is_where_the_walk_starts() -> None:
    jitted = thunder.jit(_plain)
    with stc.audit() as log, installed(STRICT), torch.no_grad():
        out = jitted(_x())
    assert log.violations == [] and out.requires_grad is False
    first = _first(jitted)
    assert _tagged(first) != []  # every symbol ran with grad disabled
    assert detached_under_grad(first, grad_enabled=False) == []
    assert [v.kind for v in detached_under_grad(first, grad_enabled=True)] == ["detached-under-grad"] * len(_tagged(first))


class _SideNoGrad(torch.autograd.Function):
    """A forward with a no_grad region for a side value; its output is computed with grad enabled."""

    @staticmethod
    def forward(ctx: Any, x: torch.Tensor) -> torch.Tensor:
        ctx.save_for_backward(x)
        with torch.no_grad():
            scale = x.abs().amax()
        return torch.sin(x) * scale

    @staticmethod
    def backward(ctx: Any, grad: torch.Tensor) -> torch.Tensor:
        return grad * 3


class _NoGradSin(torch.autograd.Function):
    """A forward whose output is computed under no_grad (eager autograd does not mind: a Function's forward runs
    without grad anyway, the backward is its own)."""

    @staticmethod
    def forward(ctx: Any, x: torch.Tensor) -> torch.Tensor:
        ctx.save_for_backward(x)
        with torch.no_grad():
            return torch.sin(x)

    @staticmethod
    def backward(ctx: Any, grad: torch.Tensor) -> torch.Tensor:
        return grad * 3


def test_an_autograd_function_with_a_no_grad_region_inside_is_silent() -> None:
    jitted = thunder.jit(lambda x: _SideNoGrad.apply(x) * 2)  # type: ignore[no-untyped-call]
    x = _x()
    with stc.audit() as log, installed(STRICT):
        jitted(x).sum().backward()
    assert log.violations == []
    torch.testing.assert_close(x.grad, torch.full_like(x, 6.0))


def test_an_autograd_function_whose_output_comes_from_its_no_grad_region_loses_its_gradient() -> None:
    """The same leak as #1620's through Thunder's torch.autograd.Function lookaside (Thunder 0.2.6 does not remove
    the tag there): eager gives the gradient of the Function's backward, Thunder a result that does not require
    grad, and the check names the lookaside's meta."""
    x = _x()
    _NoGradSin.apply(x).mul(2).sum().backward()  # type: ignore[no-untyped-call]
    torch.testing.assert_close(x.grad, torch.full_like(x, 6.0))
    jitted = thunder.jit(lambda x: _NoGradSin.apply(x) * 2)  # type: ignore[no-untyped-call]
    with stc.audit() as log, installed(AUDIT):
        out = jitted(_x())
    assert out.requires_grad is False
    (violation,) = log.violations
    assert violation.detail["kind"] == "detached-under-grad"
    assert "_general_jit_torch_autograd_function_apply_lookaside" in str(violation.detail["culprit"])


def test_inputs_that_do_not_require_grad_are_silent() -> None:
    for function in (_plain, _my_sin, _regions):
        jitted = thunder.jit(function)
        inputs = [torch.randn(2, 2)] * (2 if function is _regions else 1)
        with stc.audit() as log, installed(STRICT):
            jitted(*inputs)
        assert log.violations == [], function.__name__


def test_the_fix_points_at_the_path_that_removes_the_tag_not_at_the_function_lookaside_that_leaks_it() -> None:
    jitted = thunder.jit(lambda x: _NoGradSin.apply(x) * 2)  # type: ignore[no-untyped-call]
    with stc.audit(), installed(STRICT), pytest.raises(BrokenTraceError) as info:
        jitted(_x())
    assert info.value.culprit is not None and "_general_jit_torch_autograd_function_apply_lookaside" in info.value.culprit[1]
    assert "torch.ops.higher_order.autograd_function_apply lookaside does" in info.value.fix
    assert "as Thunder's torch.autograd.Function path does" not in info.value.fix


def _frozen(x: torch.Tensor) -> torch.Tensor:
    return _NoGradSin.apply(x) * 2  # type: ignore[no-any-return,no-untyped-call]


def _detached(x: torch.Tensor) -> torch.Tensor:
    return _NoGradSin.apply(x.detach()) * 2 + x  # type: ignore[no-any-return,no-untyped-call]


@pytest.mark.parametrize("function, requires_grad", [(_frozen, False), (_detached, True)])
def test_a_leaked_tag_on_a_symbol_that_reads_nothing_needing_grad_is_silent(function: Any, requires_grad: bool) -> None:
    """Grad enabled, but the Function reads no tensor that needs grad (an input that does not require it, a detached
    one): eager gives it no gradient either, Thunder's result is eager's."""
    x = torch.randn(2, 2, requires_grad=requires_grad)
    expected = function(x)
    jitted = thunder.jit(function)
    with stc.audit() as log, installed(STRICT):
        actual = jitted(x)
    assert log.violations == []
    torch.testing.assert_close(actual, expected)
    assert actual.requires_grad is expected.requires_grad is requires_grad


def test_a_leaked_tag_on_a_symbol_reading_a_value_computed_from_a_parameter_is_raised() -> None:
    """The interpretation's proxies do not say an intermediate needs grad: the check follows it from the weights."""
    linear = torch.nn.Linear(2, 2)
    jitted = thunder.jit(lambda x: _NoGradSin.apply(linear(x)) * 2)  # type: ignore[no-untyped-call]
    with stc.audit(), installed(STRICT), pytest.raises(BrokenTraceError, match="NoGradSin"):
        jitted(torch.randn(2, 2))


def _written_into(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    y = x.cos()
    y.mul_(w)  # y needs grad from here on, though it was computed from x alone
    return _NoGradSin.apply(y) * 2  # type: ignore[no-any-return,no-untyped-call]


def test_a_value_an_in_place_op_made_need_grad_is_followed() -> None:
    x, w = torch.randn(2, 2), torch.randn(2, 2, requires_grad=True)
    assert _written_into(x, w).requires_grad  # eager: a gradient for w
    with stc.audit(), installed(STRICT), pytest.raises(BrokenTraceError, match="NoGradSin"):
        thunder.jit(_written_into)(x, w)


# ---- a binding that tags what it is given (#2479's class) -------------------------------------------------------

def _ends_with_grad_disabled(x: torch.Tensor) -> torch.Tensor:
    """Thunder's test_set_grad_enabled: the function leaves grad disabled, so the inputs are bound with grad
    disabled (the epilogue binds the computation's output)."""
    y = x.sin()
    torch.set_grad_enabled(False)
    return y


@pytest.fixture
def tagging_binding(monkeypatch: pytest.MonkeyPatch) -> None:
    """Thunder before #2479's fix: Symbol.__call__ tags every output of a call made with grad disabled, the
    unpacking symbols bind_inputs records included, and those return the very proxy they are given."""
    import thunder.core.jit_ext as jit_ext
    from thunder.core.compile_data import get_compile_data

    original: Any = jit_ext.bind_inputs

    def bind_inputs(name: str, trace: Any, input_vars: Any, input_proxies: Any) -> None:
        original(name, trace, input_vars, input_proxies)
        data = get_compile_data()
        if data is not None and not data.is_grad_enabled:
            for proxy in input_proxies:
                proxy.tags.add(ProxyTag.DETACHED_AUTOGRAD_GRAPH)

    monkeypatch.setattr(jit_ext, "bind_inputs", bind_inputs)


@pytest.fixture
def grad_restored() -> Any:
    yield
    torch.set_grad_enabled(True)


@pytest.mark.usefixtures("tagging_binding", "grad_restored")
def test_a_tag_the_binding_adds_is_charged_to_the_binding_not_to_the_symbol() -> None:
    jitted = thunder.jit(_ends_with_grad_disabled)
    with stc.audit() as log, installed(STRICT):
        with pytest.raises(BrokenTraceError, match=r"bound symbol \d \(sin\) is called with grad enabled") as info:
            jitted(_x())
    error = info.value
    (name,) = error.names[:1]
    assert error.culprit == ("input binding", "thunder.core.jit_ext.bind_inputs")
    assert f"added after the symbol made it by input binding (thunder.core.jit_ext.bind_inputs), which bound {name} " \
        "as an input of the epilogue trace with grad disabled" in error.message
    assert "its meta" not in error.message and "with grad disabled" in error.message
    assert error.fix.startswith("thunder.core.jit_ext.bind_inputs must not tag the proxies it is given") and "call_higher_order" not in error.fix
    assert [v.detail["kind"] for v in log.violations] == ["detached-under-grad"]
    assert "bind_inputs" in str(log.violations[0].detail["culprit"])


@pytest.mark.usefixtures("tagging_binding", "grad_restored")
def test_the_audit_mode_reports_the_binding_and_the_result_has_no_grad() -> None:
    jitted = thunder.jit(_ends_with_grad_disabled)
    with stc.audit() as log, installed(AUDIT):
        out = jitted(_x())
    torch.set_grad_enabled(True)
    assert out.requires_grad is False  # the bug: the program computes something else
    assert ["bind_inputs" in str(v.detail["culprit"]) for v in log.violations] == [True]


@pytest.mark.usefixtures("grad_restored")
def test_thunders_binding_tags_nothing_it_is_given_and_nothing_is_reported() -> None:
    jitted = thunder.jit(_ends_with_grad_disabled)
    with stc.audit() as log, installed(STRICT):
        out = jitted(_x())
    torch.set_grad_enabled(True)
    assert out.requires_grad is True and log.violations == []


def test_the_binding_watch_takes_the_proxies_given_and_is_a_plain_call_outside_a_compilation() -> None:
    from thunder.core.proxies import TensorProxy

    from safe_tracectx._support.pass_catalog import PASSES
    from safe_tracectx.hooks.bindings import given_proxies, wrap_binding

    with stc.tracectx(TraceCtx()):
        a = TensorProxy("a", shape=(2,), device=thunder.core.devices.cpu, dtype=thunder.core.dtypes.float32)
    assert given_proxies(["epilogue", a, [a, 1], (2, a), {"k": a}]) == [a, a, a]
    (spec,) = [s for s in PASSES if s.hook == "binding"]
    calls: list[tuple[Any, ...]] = []
    def binding(*args: Any) -> str:
        calls.append(args)
        return "result"

    watched = wrap_binding(spec, binding)
    assert watched("epilogue", [a]) == "result" and calls == [("epilogue", [a])]


def test_the_binding_watch_records_what_it_tagged_before_it_raised_and_lets_the_exception_through() -> None:
    from thunder.core.proxies import TensorProxy

    from safe_tracectx._support.pass_catalog import PASSES
    from safe_tracectx.hooks import compilation as compilations
    from safe_tracectx.hooks.bindings import wrap_binding

    with stc.tracectx(TraceCtx()):
        a = TensorProxy("a", shape=(2,), device=thunder.core.devices.cpu, dtype=thunder.core.dtypes.float32)
        b = TensorProxy("b", shape=(2,), device=thunder.core.devices.cpu, dtype=thunder.core.dtypes.float32)
    (spec,) = [s for s in PASSES if s.hook == "binding"]
    failure = RuntimeError("the binding failed")

    def binding(name: str, proxies: list[Any], *, other: Any) -> None:
        proxies[0].tags.add(ProxyTag.DETACHED_AUTOGRAD_GRAPH)
        other.tags.add(ProxyTag.RECOMPUTE_IN_BACKWARD)
        raise failure

    compilation = compilations.start()
    try:
        with pytest.raises(RuntimeError) as info:
            wrap_binding(spec, binding)("epilogue", [a], other=b)
        assert info.value is failure
        tagged = {(name, tag): (r.culprit, r.into) for (key, tag), r in compilation.retagged.items()
                  for name, p in (("a", a), ("b", b)) if id(p) == key}
        culprit = ("input binding", "thunder.core.jit_ext.bind_inputs")
        assert tagged == {("a", ProxyTag.DETACHED_AUTOGRAD_GRAPH): (culprit, "epilogue"),
                          ("b", ProxyTag.RECOMPUTE_IN_BACKWARD): (culprit, "epilogue")}
    finally:
        compilations.end()
    assert compilation.retagged == {}  # released with the compilation


def test_each_tag_keeps_the_first_binding_that_added_it_and_each_proxy_is_kept_once() -> None:
    from thunder.core.proxies import TensorProxy

    from safe_tracectx._support.pass_catalog import PASSES
    from safe_tracectx.hooks import compilation as compilations
    from safe_tracectx.hooks.bindings import wrap_binding

    with stc.tracectx(TraceCtx()):
        a = TensorProxy("a", shape=(2,), device=thunder.core.devices.cpu, dtype=thunder.core.dtypes.float32)
    (spec,) = [s for s in PASSES if s.hook == "binding"]

    def tagging(tag: Any) -> Any:
        def binding(name: str, proxies: list[Any]) -> None:
            proxies[0].tags.add(tag)
        return wrap_binding(spec, binding)

    compilation = compilations.start()
    try:
        tagging(ProxyTag.DETACHED_AUTOGRAD_GRAPH)("epilogue", [a])
        tagging(ProxyTag.RECOMPUTE_IN_BACKWARD)("prologue", [a])
        tagging(ProxyTag.DETACHED_AUTOGRAD_GRAPH)("backward", [a])  # adds nothing: the tag is there already
        into = {tag: r.into for (key, tag), r in compilation.retagged.items() if key == id(a)}
        assert into == {ProxyTag.DETACHED_AUTOGRAD_GRAPH: "epilogue", ProxyTag.RECOMPUTE_IN_BACKWARD: "prologue"}
        assert compilation._retagged_proxies == [a, a]  # once per binding that added a tag first
    finally:
        compilations.end()
