"""A pass that breaks its trace (a use before definition) is reported, not raised: Thunder's own checks decide.

The Transform is the one of Thunder's ``test_check_trace.py::test_debug_option``,
which must have the same outcome plain and under ``--safe-tracectx=strict``.
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
from safe_tracectx.checks import Violation, ViolationKind
from safe_tracectx.hooks import installed

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


def test_the_presets_report_a_broken_trace_without_raising() -> None:
    assert (STRICT.broken_trace, LENIENT.broken_trace) == ("warn", "warn")
    assert STRICT.name_clash == "raise"  # the trace-context kinds still raise
    broken = Violation("use-before-definition", "c", "c is used before any bound symbol defines it", "bound symbol 2")
    assert isinstance(broken.to_error(), BrokenTraceError) and BrokenTraceError.check == "broken_trace"
    kinds: tuple[ViolationKind, ...] = ("ssa-redefinition", "unregistered-name", "name-clash", "borrowed-namer")
    for kind in kinds:
        assert type(Violation(kind, "c", "m", "w").to_error()) is NameClashError, kind


def test_under_strict_thunders_own_debug_check_still_reports_the_broken_transform() -> None:
    debug = thunder.DebugOptions(check_traces=True)  # type: ignore[no-untyped-call]
    jitted = thunder.jit(fn, transforms=[BrokenTransform()], debug_options=debug)
    with stc.audit() as log, pytest.warns(TraceContextWarning, match="c is used before") as caught:
        with pytest.raises(AssertionError, match="unknown proxy"):
            jitted(*_args())
    assert any("BrokenTransform.transform_traces_pre_prologue" in str(w.message) for w in caught)
    (violation,) = log.violations
    assert (violation.detail["code"], violation.detail["check"], violation.detail["action"]) == (
        "BrokenTraceError", "broken_trace", "warn"
    )
    assert violation.pass_name == "BrokenTransform.transform_traces_pre_prologue"


def test_without_the_debug_option_the_program_fails_as_it_would_plain() -> None:
    jitted = thunder.jit(fn, transforms=[BrokenTransform()], executors=())
    with installed(STRICT), pytest.warns(TraceContextWarning):
        with pytest.raises(UnboundLocalError, match="cannot access local|referenced before assignment"):
            jitted(*_args())


def test_raising_on_a_broken_trace_is_one_override_away() -> None:
    jitted = thunder.jit(fn, transforms=[BrokenTransform()], executors=())
    with installed(STRICT), stc.use_policy("strict", broken_trace="raise"), pytest.raises(BrokenTraceError) as info:
        jitted(*_args())
    assert "BrokenTransform.transform_traces_pre_prologue" in str(info.value)
    assert "c is used before any bound symbol defines it" in str(info.value)


def test_thunders_test_debug_option_passes_plain_strict_and_audit(pytester: pytest.Pytester) -> None:
    tests_dir = os.path.dirname(thunder.__file__) + "/tests"
    test = f"{tests_dir}/test_check_trace.py::test_debug_option"
    for mode in ((), ("--safe-tracectx=strict",), ("--safe-tracectx=audit",)):
        result = pytester.runpytest_subprocess(
            *mode, "-p", "no:cacheprovider", "-c", os.devnull, f"--rootdir={tests_dir}", test
        )
        assert result.parseoutcomes().get("passed") == 1, (mode, result.stdout.str()[-2000:])
