"""ThunderFX: torch.compile with Thunder as its backend, on a model with an op Thunder does not support (torch.sinc:
the 0.2.6 splitter gives it to inductor as MISSING_OP_SUPPORT). Each Thunder compilation says which FX graph and
split module it is, why the splitter split and what ran in PyTorch; the splitter's support checks are a phase."""

from __future__ import annotations

import json
import re
import warnings
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest
import torch
import thunder.dynamo.compiler as thunder_compiler
import thunder.dynamo.splitter as thunder_splitter
import thunder.dynamo.utils as thunder_dynamo_utils
from thunder.dynamo import ThunderCompiler, thunderfx

import safe_tracectx as stc
from safe_tracectx.auditlog.log import AuditLog
from safe_tracectx.report.text import render_text

SUPPORT_CHECKS = "ThunderFX splitter (support checks)"


class SincBetweenThunderOps(torch.nn.Module):
    """Thunder, then an op Thunder only has an automatic torch fallback for, then Thunder again."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.sinc(x.sin()).cos() * 2


@dataclass
class Compiled:
    log: AuditLog
    backend: ThunderCompiler
    output: torch.Tensor


def _thunder_compiler() -> ThunderCompiler:
    return ThunderCompiler()  # type: ignore[no-untyped-call]


def _hooked(module: object, name: str) -> Any:
    """``module.name`` as bound now (the hooks rebind it)."""
    return getattr(module, name)


def _compile_and_run(compile_: Any) -> tuple[AuditLog, torch.Tensor]:
    torch._dynamo.reset()
    x = torch.randn(8)
    with warnings.catch_warnings(), stc.audit() as log:
        warnings.simplefilter("ignore")
        output = compile_(SincBetweenThunderOps())(x)
    torch.testing.assert_close(output, SincBetweenThunderOps()(x))
    return log, output


@pytest.fixture(scope="module")
def compiled() -> Iterator[Compiled]:
    backend = _thunder_compiler()
    log, output = _compile_and_run(lambda model: torch.compile(model, backend=backend))
    yield Compiled(log, backend, output)
    torch._dynamo.reset()


def _backend_of(log: AuditLog) -> int:
    (split,) = [r["thunderfx"] for r in log.pass_runs if r["label"] == "ThunderFX splitter"]
    backend: int = split["backend"]
    return backend


def test_each_thunder_compilation_names_its_fx_graph_and_split_module(compiled: Compiled) -> None:
    tracing = [r for r in compiled.log.pass_runs if r["kind"] == "tracing"]
    assert [r["thunderfx"]["split"] for r in tracing] == ["thunder_0", "thunder_2"]
    for run in tracing:
        record = run["thunderfx"]
        assert record["graph"] == 0 and record["modules"] == ["thunder_0", "inductor_1", "thunder_2"]
        assert record["pytorch"] == [{"module": "inductor_1", "by": "inductor", "ops": ["torch.sinc"]}]
    # the reasons are Thunder's own, as its SubgraphInfo holds them
    (info,) = compiled.backend.subgraph_infos
    assert info.split_reasons is not None and info.split_graph_module is not None
    expected = [{"type": r.reason_type.name, "info": r.info, "exception": r.exception} for r in info.split_reasons]
    assert [r["type"] for r in expected] == ["MISSING_OP_SUPPORT"]
    assert all(r["thunderfx"]["reasons"] == expected for r in tracing)
    # the split names are the split module's own
    assert [name for name, _ in info.split_graph_module.named_children()] == tracing[0]["thunderfx"]["modules"]


def test_the_report_says_the_split_why_what_ran_in_pytorch_and_which_compilation(compiled: Compiled) -> None:
    report = compiled.log.report()
    backend = _backend_of(compiled.log)
    section = report[report.index("ThunderFX (torch.compile with Thunder as its backend)") :]
    assert f"FX graph 0 of ThunderCompiler {backend}: split into thunder_0, inductor_1, thunder_2" in section
    assert re.search(r"split because MISSING_OP_SUPPORT: node with name: \w+ and target: .*sinc.* only has an "
                     r"automatic torch fallback in thunder", section)
    assert "ran in PyTorch: inductor_1 (inductor): torch.sinc" in section
    assert "compiled by Thunder: thunder_0 in compilation 1; thunder_2 in compilation 2" in section
    # a saved document reports the same (safe-tracectx report FILE)
    assert render_text(json.loads(compiled.log.to_json())) == report


def test_the_splitters_support_checks_are_a_phase_not_outside_every_pass(compiled: Compiled) -> None:
    log = compiled.log
    assert "(outside remat passes)" not in log.proxies_by_pass
    assert log.proxies_by_pass[SUPPORT_CHECKS] > 0
    phases = {p["label"]: p for p in log.phases()}
    assert phases[SUPPORT_CHECKS]["kind"] == "thunderfx" and phases[SUPPORT_CHECKS]["proxies"] > 0
    assert phases["ThunderFX splitter"]["runs"] == 1
    (splitter,) = [r for r in log.pass_runs if r["label"] == "ThunderFX splitter"]
    assert splitter["kind"] == "thunderfx" and splitter["thunderfx"]["split"] is None
    assert splitter["proxies"] == log.proxies_by_pass[SUPPORT_CHECKS]  # the pass counts its phase's proxies
    report = log.report()
    assert re.search(rf"thunderfx\s+{re.escape(SUPPORT_CHECKS)}\s+0\s+[\d.]+\s+{log.proxies_by_pass[SUPPORT_CHECKS]}\b", report)


def test_uninstall_puts_the_splitter_and_its_support_check_back(compiled: Compiled) -> None:
    originals = (thunder_splitter._splitter, thunder_dynamo_utils.is_node_supported_by_thunder)
    with stc.installed():
        assert _hooked(thunder_compiler, "_splitter") is not originals[0]
        assert _hooked(thunder_splitter, "is_node_supported_by_thunder") is not originals[1]
    assert _hooked(thunder_compiler, "_splitter") is originals[0] and thunder_splitter._splitter is originals[0]
    assert _hooked(thunder_splitter, "is_node_supported_by_thunder") is originals[1]
    assert not hasattr(originals[0], "__safe_tracectx_pass__")
    support = stc.thunder_support()
    assert {"thunder.dynamo.splitter._splitter", "thunder.dynamo.utils.is_node_supported_by_thunder"} <= set(support.present)


def test_thunderfx_compilations_say_the_same() -> None:
    log, _ = _compile_and_run(thunderfx)
    report = log.report()
    assert f"FX graph 0 of ThunderCompiler {_backend_of(log)}: split into thunder_0, inductor_1, thunder_2" in report
    assert "ran in PyTorch: inductor_1 (inductor): torch.sinc" in report
    assert "compiled by Thunder: thunder_0 in compilation 1; thunder_2 in compilation 2" in report
    assert log.proxies_by_pass[SUPPORT_CHECKS] > 0


def test_a_graph_thunder_runs_whole_says_it_was_not_split() -> None:
    torch._dynamo.reset()
    with stc.audit() as log:
        torch.compile(lambda x: x.sin().cos() * 2, backend=_thunder_compiler())(torch.randn(4))
    report = log.report()
    assert ": split into thunder_0\n    not split: Thunder supports every op of the graph\n    ran in PyTorch: nothing\n" \
        "    compiled by Thunder: thunder_0 in compilation 1" in report
    torch._dynamo.reset()


def test_a_thunder_without_the_support_check_still_audits_the_splitter(monkeypatch: pytest.MonkeyPatch) -> None:
    """A name missing from the installed Thunder is not hooked, and nothing fails: its proxies are the splitter's."""
    monkeypatch.delattr(thunder_dynamo_utils, "is_node_supported_by_thunder")
    assert "thunder.dynamo.utils.is_node_supported_by_thunder" in stc.thunder_support().missing
    torch._dynamo.reset()
    with stc.audit() as log:
        torch.compile(lambda x: x.sin() * 2, backend=_thunder_compiler())(torch.randn(4))
    assert SUPPORT_CHECKS not in log.proxies_by_pass and log.proxies_by_pass["ThunderFX splitter"] > 0
    torch._dynamo.reset()


def test_a_thunder_without_the_splitter_is_installed_without_its_hook(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delattr(thunder_splitter, "_splitter")
    assert "thunder.dynamo.splitter._splitter" in stc.thunder_support().missing
    with stc.installed():
        assert not hasattr(_hooked(thunder_compiler, "_splitter"), "__safe_tracectx_pass__")
    assert not hasattr(thunder_splitter, "_splitter")
