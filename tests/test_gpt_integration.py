"""A small GPT through thunder.jit and the torch.compile executor, fw + bw, installed (STRICT, audit) vs plain."""

from __future__ import annotations

import json
import warnings
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest
import torch


from safe_tracectx import STRICT
from safe_tracectx.auditlog.log import AuditLog
from safe_tracectx.demo.model import tiny_gpt
from safe_tracectx.hooks import install, installed_audit_log, uninstall
from safe_tracectx.traces.checks import check_forward_backward, check_trace

with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    import thunder
    from thunder.executors.torch_compile import torch_compile_ex


@dataclass
class Run:
    logits: torch.Tensor
    loss: torch.Tensor
    grads: dict[str, torch.Tensor]
    jitted: Any
    log: AuditLog | None


def _run(*, hooked: bool) -> Run:
    model = tiny_gpt(seed=0)
    generator = torch.Generator().manual_seed(1)
    idx = torch.randint(0, 64, (2, 16), generator=generator)
    targets = torch.randint(0, 64, (2, 16), generator=generator)
    if hooked:
        install(STRICT, audit=True)  # every Thunder from 0.2.1 on, whose backward recompute renames or not
    try:
        jitted = thunder.jit(model, executors=[torch_compile_ex])
        logits, loss = jitted(idx, targets)
        loss.backward()
    finally:
        log = installed_audit_log() if hooked else None
        if hooked:
            uninstall()
    grads = {name: p.grad.clone() for name, p in model.named_parameters() if p.grad is not None}
    return Run(logits.detach(), loss.detach(), grads, jitted, log)


@pytest.fixture(scope="module")
def runs() -> Iterator[tuple[Run, Run]]:
    yield _run(hooked=False), _run(hooked=True)


def test_same_outputs_and_gradients(runs: tuple[Run, Run]) -> None:
    plain, hooked = runs
    assert torch.equal(plain.logits, hooked.logits)
    assert torch.equal(plain.loss, hooked.loss)
    assert plain.grads.keys() == hooked.grads.keys() and len(plain.grads) > 10
    for name in plain.grads:
        assert torch.equal(plain.grads[name], hooked.grads[name]), name


def test_audit_shows_the_remat_passes_and_their_proxies_by_call_site(runs: tuple[Run, Run]) -> None:
    log = runs[1].log
    assert log is not None
    assert {"fusion remat", "autodiff grad transform", "forward/backward split"} <= set(log.passes)
    assert log.leaked_sets == []
    assert all(stats["violations"] == [] for stats in log.passes.values())
    assert log.violations == []
    assert log.counts["trace_set"] == log.counts["trace_reset"] > 50
    recompute = [(site, n) for site, pass_name, n in log.by_call_site() if pass_name == "backward recompute"]
    assert recompute, "checkpointed blocks are recomputed in the backward"
    site, count = recompute[0]
    assert site is not None and site.filename.endswith("transforms/autodiff.py") and "InsertRecomputations" in site.function
    report = log.report(top=5)
    for section in ("Remat passes", "fusion remat", "backward recompute", "Trace set/reset balance", "Violations (0)"):
        assert section in report
    document = json.loads(log.to_json())
    assert document["schema"] == "safe-tracectx/audit" and document["version"] == 2
    assert document["proxies_by_pass"]["backward recompute"] == log.proxies_by_pass["backward recompute"]


def test_check_trace_finds_nothing_on_the_traces_thunder_produced(runs: tuple[Run, Run]) -> None:
    for run in runs:
        fws = thunder.last_traces(run.jitted)
        bws = thunder.last_backward_traces(run.jitted)
        for trace in [*fws, *bws]:
            names = frozenset(trace.names)
            assert check_trace(trace) == [], trace.get_provenance()
            assert frozenset(trace.names) == names
        assert check_forward_backward(fws[-1], bws[-1]) == []  # reusing a forward name in the backward is no clash:
        # they are two programs (0.2.4's backward recompute does it, 0.2.6 renames), and the hand-over matches


def test_every_pass_is_audited_and_the_pass_table_lists_the_executors_that_ran(runs: tuple[Run, Run]) -> None:
    log = runs[1].log
    assert log is not None
    labels = {run["label"] for run in log.pass_runs}
    assert {"interpretation/tracing", "operator executors", "TorchCompileExecutor.fusion_pass"} <= labels
    assert "(outside remat passes)" not in log.proxies_by_pass
    kinds = {phase["kind"] for phase in log.phases()}
    assert {"tracing", "autodiff", "execution", "split", "fusion", "remat"} <= kinds
    report = log.report(top=0)
    assert "TorchCompileExecutor.fusion_pass" in report and "Work by phase" in report
    assert all(run["violations"] == [] for run in log.pass_runs)
