"""Every pass is a pass in the audit: Transform methods, executors' fusion passes, audited_pass, culprits."""

from __future__ import annotations

import json
import warnings
from pathlib import Path
from typing import Any

import pytest
import torch
from thunder.core import devices, dtypes
from thunder.core.proxies import TensorProxy
from thunder.core.trace import TraceCtx, from_trace, tracectx
from thunder.core.transform_common import Transform
from thunder.extend import FusionExecutor

import safe_tracectx as stc
from safe_tracectx import NameClashError, STRICT, TraceContextWarning
from safe_tracectx.auditlog.log import PASS_RUN_KEYS
from safe_tracectx.cli import main
from safe_tracectx.hooks import installed
from safe_tracectx.hooks.compilation import Compilation

with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    import thunder

from test_example import example  # the example module, loaded once

ROOT = Path(__file__).resolve().parent.parent
EXAMPLE = ROOT / "examples" / "recompute_in_backward.py"


def _args() -> list[torch.Tensor]:
    torch.manual_seed(0)
    return [torch.randn(4, 8, requires_grad=True), torch.randn(8, 8, requires_grad=True), torch.randn(8, 8, requires_grad=True)]


def _step(transforms: list[Transform]) -> None:
    thunder.jit(example.mlp, transforms=transforms)(*_args()).backward()


def test_the_example_without_its_rename_is_a_name_clash_naming_the_transform_and_the_name() -> None:
    with installed(STRICT), pytest.raises(NameClashError) as info:
        _step([example.RecomputeInBackward(rename=False)])
    message = str(info.value)
    assert "RecomputeInBackward.transform_trace_post_optimization" in message
    assert "is defined again, after bound symbol" in message and "(unpack_sequence)" in message
    assert info.value.kind == "defined-twice" and info.value.culprit is not None
    assert info.value.culprit[0] == "Recompute ['mul'] in backward"  # the step Thunder's provenance names


def test_under_run_the_clash_is_a_violation_attributed_to_the_transform(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    data = tmp_path / "audit.json"
    label = "RecomputeInBackward.transform_trace_post_optimization"
    with pytest.warns(TraceContextWarning, match=f"{label}.*is defined again"):  # lenient: warned
        status = main(["run", "--policy", "lenient", "--json", str(data), str(EXAMPLE), "--no-rename", "--unguarded"])
    assert status == 0
    document = json.loads(data.read_text())
    (violation,) = [v for v in document["violations"] if v["error"] == "NameClashError"]
    assert violation["pass"] == label and label in violation["message"]
    (culprit,) = [r for r in document["pass_runs"] if r["violations"]]
    assert culprit["label"] == label and culprit["role"] == "backward" and culprit["kind"] == "transform"
    assert "defined-twice" in culprit["violations"][0]
    assert label in capsys.readouterr().out


class BorrowedNamer(Transform):
    """Makes the forward trace active just to name a proxy it puts into the backward (the bug the audit reports)."""

    def __init__(self) -> None:
        self.forward: TraceCtx | None = None

    def transform_trace_post_optimization(self, computation_trace: TraceCtx, **kwargs: Any) -> TraceCtx:
        if computation_trace.siginfo().name != "backward_fn":
            self.forward = computation_trace
            return computation_trace
        new = from_trace(computation_trace)
        new.names = set(computation_trace.names)  # its own names (from_trace shares them: then nothing can clash)
        assert self.forward is not None
        self.forward.name_ctr = max(self.forward.name_ctr, computation_trace.name_ctr)  # past the backward's namer
        bsyms = list(computation_trace.bound_symbols)
        at, op = next(
            (i, b) for i, b in enumerate(bsyms) if isinstance(b.output, TensorProxy) and not b.sym.name.startswith("unpack")
        )
        with tracectx(self.forward):
            extra = TensorProxy(like=op.output)  # named by the forward, for the backward
        new.bound_symbols = [*bsyms[: at + 1], op.from_bsym(output=extra), *bsyms[at + 1 :]]
        return new


def test_a_transform_borrowing_the_forward_namer_is_reported_when_asked_for() -> None:
    with stc.audit() as log:
        _step([BorrowedNamer()])  # off by default: the clash is foreseen, not seen
    assert all(r["violations"] == [] for r in log.pass_runs)
    with stc.audit() as log, stc.use_policy("lenient", borrowed_namer="warn"):
        with pytest.warns(stc.TraceContextWarning, match="borrow its namer"):
            _step([BorrowedNamer()])
    (run,) = [r for r in log.pass_runs if r["violations"]]
    assert run["label"] == "BorrowedNamer.transform_trace_post_optimization" and run["role"] == "backward"
    assert "borrowed-namer" in run["violations"][0] and "will hand it out again" in run["violations"][0]
    with installed(STRICT), stc.use_policy("strict", borrowed_namer="raise"), pytest.raises(NameClashError, match="borrow its namer"):
        _step([BorrowedNamer()])


def test_pass_runs_follow_the_contract_and_name_transforms_and_executors() -> None:
    with stc.audit() as log:
        _step([example.RecomputeInBackward()])
    for run in log.pass_runs:
        assert tuple(run) == PASS_RUN_KEYS
        assert isinstance(run["label"], str) and isinstance(run["seconds"], float) and isinstance(run["changed"], bool)
        assert isinstance(run["proxies"], int) and run["violations"] == []
        for trace_print in run["fingerprints"]:
            for symbol, names, shapes, dtypes_ in trace_print:
                assert isinstance(symbol, str) and len(names) == len(shapes) == len(dtypes_)
    labels = {r["label"] for r in log.pass_runs}
    assert {"interpretation/tracing", "autodiff grad transform", "forward/backward split"} <= labels
    assert "TorchCompileExecutor.fusion_pass" in labels or any(label.endswith(".fusion_pass") for label in labels)
    roles = {r["role"] for r in log.pass_runs if r["label"] == "RecomputeInBackward.transform_trace_post_optimization"}
    assert roles == {"forward", "backward"}
    assert json.loads(log.to_json())["pass_runs"][0]["label"] == log.pass_runs[0]["label"]
    assert "(outside remat passes)" not in log.proxies_by_pass


def test_classes_defined_after_install_are_hooked_and_uninstall_puts_every_original_back() -> None:
    post = Transform.transform_trace_post_optimization
    stc.install("strict", audit=True)
    try:

        class Late(Transform):
            def transform_trace_post_optimization(self, computation_trace: TraceCtx, **kwargs: Any) -> TraceCtx:
                return computation_trace

        class LateExecutor(FusionExecutor):
            def fusion_pass(self, trace: TraceCtx) -> TraceCtx:
                return trace

        original = Late.__dict__["transform_trace_post_optimization"].__wrapped__
        assert hasattr(Late.__dict__["transform_trace_post_optimization"], "__safe_tracectx_method__")
        assert any(name.endswith("LateExecutor.fusion_pass") for name in stc.thunder_support().methods)
        trace = TraceCtx()
        assert Late().transform_trace_post_optimization(trace) is trace
        assert LateExecutor("late").fusion_pass(trace) is trace
        log = stc.hooks.installed_audit_log()
        assert log is not None
        assert [r["label"] for r in log.pass_runs][-2:] == [
            "test_classes_defined_after_install_are_hooked_and_uninstall_puts_every_original_back.<locals>.Late"
            ".transform_trace_post_optimization",
            "test_classes_defined_after_install_are_hooked_and_uninstall_puts_every_original_back.<locals>.LateExecutor"
            ".fusion_pass",
        ]
    finally:
        stc.uninstall()
    assert Late.__dict__["transform_trace_post_optimization"] is original
    assert Transform.transform_trace_post_optimization is post and "__init_subclass__" not in Transform.__dict__
    assert "__init_subclass__" not in FusionExecutor.__dict__


def test_a_subclass_calling_super_is_one_pass_run() -> None:
    class Base(Transform):
        def transform_trace_post_optimization(self, computation_trace: TraceCtx, **kwargs: Any) -> TraceCtx:
            return computation_trace

    class Child(Base):
        def transform_trace_post_optimization(self, computation_trace: TraceCtx, **kwargs: Any) -> TraceCtx:
            return super().transform_trace_post_optimization(computation_trace, **kwargs)

    with stc.audit() as log:
        Child().transform_trace_post_optimization(TraceCtx())
    assert [r["label"].rsplit(".", 2)[-2] for r in log.pass_runs] == ["Child"]


def test_audited_pass_decorator_and_block_are_passes_with_validated_outputs() -> None:
    fw = TraceCtx()
    with tracectx(fw):
        a = TensorProxy("a", shape=(1,), device=devices.cpu, dtype=dtypes.float32)
    from thunder.core import prims

    fw.args = (a,)
    with tracectx(TraceCtx()):
        elsewhere = TensorProxy("c", like=a)  # defined by nothing in the output
    bad = from_trace(fw)
    bad.names = set(fw.names)
    bad.args = (a,)
    bad.bound_symbols = [prims.neg.bind(elsewhere, output=None)]

    @stc.audited_pass("my remat")
    def my_remat(trace: TraceCtx) -> TraceCtx:
        return bad

    assert my_remat(fw) is bad  # not installed: calls through
    with stc.audit() as log, stc.use_policy("lenient"), pytest.warns(stc.TraceContextWarning):
        my_remat(fw)
        with stc.audited_pass("by hand", inputs=(fw,)) as p:
            p.outputs(fw)
    assert [(r["label"], r["kind"], bool(r["violations"])) for r in log.pass_runs] == [
        ("my remat", "user", True),
        ("by hand", "user", False),
    ]
    assert any(entry.startswith("my remat (") for entry in stc.thunder_support().user_passes)


def test_the_culprit_is_the_first_step_whose_trace_has_the_violation() -> None:
    from thunder.core import prims

    def trace_with(*bsyms: Any) -> TraceCtx:
        trace = TraceCtx()
        trace.args = (a,)
        trace.bound_symbols = list(bsyms)
        return trace

    with tracectx(TraceCtx()):
        a = TensorProxy("a", shape=(1,), device=devices.cpu, dtype=dtypes.float32)
        b = TensorProxy("b", like=a)
    clean, first, later = (
        trace_with(prims.neg.bind(a, output=b)),
        trace_with(prims.neg.bind(a, output=b), prims.exp.bind(a, output=b)),
        trace_with(prims.neg.bind(a, output=b), prims.exp.bind(a, output=b), prims.sin.bind(a, output=None)),
    )
    c = Compilation()
    for trace, label in ((clean, "split"), (first, "A"), (later, "B")):
        c.record_step(trace, label, f"q.{label}", within=None)
    step = c.culprit_of("defined-twice", "b")
    assert step is not None and step.culprit == ("A", "q.A")
    c.record_step(first, "Dead Code Elimination", "q.dce", within="A", named=True)  # Thunder names the step
    assert step.culprit == ("Dead Code Elimination", "q.A, named by q.dce")
    assert c.culprit_of("use-before-definition", "b") is None
    assert c.seen(first) and not c.seen(TraceCtx())


def test_the_report_breaks_the_work_down_by_phase_and_role() -> None:
    with stc.audit() as log:
        _step([example.RecomputeInBackward()])
    phases = {p["label"]: p for p in log.to_dict()["phases"]}
    assert phases["interpretation/tracing"]["kind"] == "tracing" and phases["interpretation/tracing"]["proxies"] > 0
    assert phases["autodiff grad transform"]["kind"] == "autodiff"
    assert phases["forward/backward split"]["kind"] == "split"
    recompute = phases["RecomputeInBackward.transform_trace_post_optimization"]
    assert recompute["kind"] == "transform" and recompute["runs"] == 2 and recompute["by_role"]["backward"] == 1
    assert [p["kind"] for p in log.phases()][0] == "tracing"
    text = log.report()
    assert "Work by phase" in text and "by role: forward 1 runs" in text and "backward 1 runs" in text


def test_the_pytest_plugin_in_strict_mode_fails_the_test_whose_transform_clashes(tmp_path: Path) -> None:
    import subprocess
    import sys

    (tmp_path / "test_clash.py").write_text(
        "import runpy, sys\n"
        "def test_example_without_rename() -> None:\n"
        f"    sys.argv = [{str(EXAMPLE)!r}, '--no-rename', '--unguarded']\n"
        f"    runpy.run_path({str(EXAMPLE)!r}, run_name='__main__')\n"
    )
    run = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--safe-tracectx=strict", "test_clash.py"],
        cwd=tmp_path, capture_output=True, text=True, timeout=300,
    )
    assert run.returncode == 1 and "NameClashError" in run.stdout, run.stdout[-3000:]
    assert "RecomputeInBackward.transform_trace_post_optimization" in run.stdout


def test_a_record_of_a_step_inside_a_pass_that_nothing_runs_is_not_checked() -> None:
    from thunder.core.trace import TraceCtx, TraceProvenance

    from safe_tracectx.hooks.compilation import checked_kind

    record, handed_on = TraceCtx(), TraceCtx()
    record.set_provenance(TraceProvenance("Intermediate trace of `functionalize_inplace_ops`"))
    handed_on.set_provenance(TraceProvenance("Functionalize in-place ops"))
    assert not checked_kind(record) and checked_kind(handed_on)
