"""untranslated-value: a program about to run hands Python Thunder's own dtype or device (#2669's class: the epilogue
wrote a module attribute set to ``x.device`` as a thunder.devices.Device), on real thunder.jit compiles."""

from __future__ import annotations

import dataclasses
import warnings
from typing import Any

import pytest
import torch
from thunder.core import devices, dtypes, prims
from thunder.core.proxies import TensorProxy
from thunder.core.trace import TraceCtx, get_tracectx
from thunder.core.transform_common import Transform

import safe_tracectx as stc
from safe_tracectx import STRICT, BrokenTraceError
from safe_tracectx.hooks import installed
from safe_tracectx.policy import AUDIT
from safe_tracectx.traces.torch_values import TRANSLATION, untranslated_values

with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    import thunder
    import thunder.torch as ltorch


@dataclasses.dataclass
class Holder(dict[str, Any]):
    """Thunder's regression test of #2669 writes the attribute of a dataclass that is a dict."""

    device: Any = dataclasses.field(init=False)  # set by the forward (no default: absent until then)


class WritesDevice(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.holder = Holder()

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.dtype, torch.device]:
        self.holder.device = x.device
        return 2 * x, x.dtype, x.device


_ORIGINAL: Any = thunder.transform_to_torch_types  # type: ignore[attr-defined]


def _return_only(trace: TraceCtx, translate_all: bool = False) -> TraceCtx:
    return _ORIGINAL(trace)  # type: ignore[no-any-return]


@pytest.fixture
def translates_only_the_return(monkeypatch: pytest.MonkeyPatch) -> None:
    """Thunder before #2669's fix: the epilogue's types are translated in its return only."""
    monkeypatch.setattr(thunder, "transform_to_torch_types", _return_only)


@pytest.mark.usefixtures("translates_only_the_return")
def test_an_untranslated_device_written_by_the_epilogue_is_raised_under_strict_before_it_runs() -> None:
    model = WritesDevice()
    jitted = thunder.jit(model)
    with stc.audit() as log, installed(STRICT):
        with pytest.raises(BrokenTraceError, match=r"bound symbol \d \(pack_attr\), which Python runs itself, hands "
                           r"thunder.devices.Device\(type='cpu'\) into any0") as info:
            jitted(torch.ones(2))
    error = info.value
    assert error.kind == "untranslated-value" and error.names == ("any0",)
    assert error.culprit == TRANSLATION
    assert "transform_to_torch_types(trace, translate_all=True)" in error.fix
    assert not hasattr(model.holder, "device")  # raised before the epilogue ran
    assert get_tracectx() is None
    assert [(v.detail["kind"], v.detail["names"]) for v in log.violations] == [("untranslated-value", ["any0"])]


@pytest.mark.usefixtures("translates_only_the_return")
def test_the_audit_mode_reports_it_and_the_user_gets_thunders_device() -> None:
    model = WritesDevice()
    with stc.audit() as log, installed(AUDIT):
        out = thunder.jit(model)(torch.ones(2))
    assert type(model.holder.device) is devices.Device  # the bug: another object than eager PyTorch gives
    assert out[1:] == (torch.float32, torch.device("cpu"))  # the return was translated
    assert ["transform_to_torch_types" in str(v.detail["culprit"]) for v in log.violations] == [True]


def test_thunders_translation_leaves_nothing_and_nothing_is_reported() -> None:
    model = WritesDevice()
    with stc.audit() as log, installed(STRICT):
        out = thunder.jit(model)(torch.ones(2, requires_grad=True))
        out[0].sum().backward()
    assert type(model.holder.device) is torch.device and out[1] is torch.float32
    assert log.violations == []


def test_the_check_can_be_switched_to_a_warning() -> None:
    from safe_tracectx.traces.torch_values import PYTHON_RUN

    assert {prims.PrimIDs.RETURN, prims.PrimIDs.PACK_ATTR, prims.PrimIDs.PACK_SETITEM} <= PYTHON_RUN
    assert STRICT.action_of_check("untranslated-value") is None and STRICT.broken_trace == "raise"
    assert STRICT.replace(untranslated_value="warn").action_of_check("untranslated-value") == "warn"
    model = WritesDevice()
    thunder.transform_to_torch_types = _return_only  # type: ignore[attr-defined]
    try:
        with installed(STRICT.replace(untranslated_value="warn")), pytest.warns(Warning, match="pack_attr"):
            thunder.jit(model)(torch.ones(2))
    finally:
        thunder.transform_to_torch_types = _ORIGINAL  # type: ignore[attr-defined]
    assert type(model.holder.device) is devices.Device


def _trace_with(*bound: Any) -> TraceCtx:
    trace = TraceCtx()
    with stc.tracectx(trace):
        a = TensorProxy("a", shape=(2,), device=devices.cpu, dtype=dtypes.float32)
        trace.args = (a,)
        bsyms = [factory(a) for factory in bound]
    trace.bound_symbols = [prims.unpack_trivial.bind(a, name="a", output=a), *bsyms]
    return trace


def test_only_the_symbols_python_runs_are_read_nested_values_included_and_proxies_are_not_walked() -> None:
    to = lambda a: ltorch.to.bind(a, dtypes.float16, output=a)  # noqa: E731 - an operator: its executor translates
    ret = lambda a: prims.python_return.bind((a, {"kind": [dtypes.float16]}), output=None)  # noqa: E731
    trace = _trace_with(to, ret)
    (violation,) = untranslated_values(trace)
    assert violation.kind == "untranslated-value" and violation.name == "return"
    assert "bound symbol 2 (python_return)" in violation.message and "thunder.dtypes.float16 to the caller" in violation.message
    assert untranslated_values(_trace_with(lambda a: prims.python_return.bind(a, output=None))) == []
    setitem = lambda a: prims.pack_setitem.bind(a, "k", devices.cpu, output=None)  # noqa: E731
    assert [v.name for v in untranslated_values(_trace_with(setitem))] == ["a"]
    kwargs = lambda a: prims.python_return.bind(a, output=None).from_bsym(kwargs={"k": dtypes.float16})  # noqa: E731
    assert [v.name for v in untranslated_values(_trace_with(kwargs))] == ["return"]


def test_a_check_that_reads_a_trace_leaves_it_as_it_was() -> None:
    ret = lambda a: prims.python_return.bind((a, dtypes.float32), output=None)  # noqa: E731
    trace = _trace_with(ret)
    before = (list(trace.bound_symbols), set(trace.names), str(trace))
    assert len(untranslated_values(trace)) == 1
    assert (list(trace.bound_symbols), set(trace.names), str(trace)) == before


class ReadsTheEpilogue(Transform):
    """A transform that asks for the epilogue's callable only to read it, before Thunder translates its types."""

    def __init__(self) -> None:
        self.sources: list[str] = []

    def transform_traces_pre_prologue(
        self, prologue_trace: TraceCtx, computation_trace: TraceCtx, epilogue_trace: TraceCtx | None, **kwargs: Any
    ) -> tuple[TraceCtx, TraceCtx, TraceCtx | None]:
        import inspect

        if epilogue_trace is not None:
            self.sources.append(inspect.getsource(epilogue_trace.python_callable()))
        return prologue_trace, computation_trace, epilogue_trace


def test_a_callable_asked_for_before_the_translation_is_not_what_runs_and_is_not_reported() -> None:
    model, reader = WritesDevice(), ReadsTheEpilogue()
    with stc.audit() as log, installed(STRICT):
        thunder.jit(model, transforms=[reader])(torch.ones(2))
    assert any("devices.Device" in source for source in reader.sources)  # untranslated when it was read
    assert type(model.holder.device) is torch.device and log.violations == []


def test_dict_keys_and_deep_nesting_are_read() -> None:
    key = lambda a: prims.python_return.bind({dtypes.float32: a}, output=None)  # noqa: E731
    assert [v.name for v in untranslated_values(_trace_with(key))] == ["return"]
    deep: Any = devices.cpu
    for _ in range(20):
        deep = (deep,)
    nested = lambda a: prims.pack_setitem.bind(a, "k", deep, output=None)  # noqa: E731
    assert [v.name for v in untranslated_values(_trace_with(nested))] == ["a"]


def test_a_dtype_key_in_what_a_jitted_function_returns_is_reported() -> None:
    """Thunder translates no dict key: ``{x.dtype: ...}`` comes back keyed by thunder.dtypes.float32."""
    jitted = thunder.jit(lambda x: {x.dtype: x * 2})
    with stc.audit() as log, installed(AUDIT):
        out = jitted(torch.ones(2))
    assert torch.float32 not in out  # what the user gets: Thunder's dtype as the key
    assert [(v.detail["kind"], v.detail["names"]) for v in log.violations] == [("untranslated-value", ["return"])]
