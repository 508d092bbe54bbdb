"""The example fusion executor: clean under install("strict") and the sweep; its fusion pass is in the audit."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
import torch

import safe_tracectx as stc
from safe_tracectx.cli import main
from safe_tracectx.exitcodes import ExitStatus
from example_modules import EXAMPLES, load_example

PATH = EXAMPLES / "elementwise_executor.py"


example = load_example("elementwise_executor")


def test_same_gradients_under_strict_and_its_fusion_pass_is_audited() -> None:
    plain = example._gradients(None)
    with stc.audit() as log, stc.use_policy("strict"):
        fused = example._gradients([example.ElementwiseExecutor()])
    assert all(torch.allclose(a, b) for a, b in zip(plain, fused, strict=True))
    runs = [r for r in log.pass_runs if r["label"] == "ElementwiseExecutor.fusion_pass"]
    assert len(runs) == 1 and runs[0]["kind"] == "fusion" and runs[0]["changed"] and runs[0]["violations"] == []
    fused_symbols = [s for s, *_ in runs[0]["fingerprints"][0] if s.startswith("Elementwise")]
    assert fused_symbols and log.passes["fusion remat"]["runs"] >= 1 and log.violations == []


def test_the_sweep_finds_nothing_to_break(capsys: pytest.CaptureFixture[str]) -> None:
    status = main(["sweep", "--max", "40", "--seed", "3", str(PATH)])
    out = capsys.readouterr().out
    assert status == ExitStatus.OK and "broken: 0" in out, out
