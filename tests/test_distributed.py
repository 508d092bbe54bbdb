"""Thunder DDP on the CPU (gloo, 2 processes) under ``safe-tracectx run`` via torchrun; combine; divergence.

Until the audit records ``pass_runs`` (issue 14), the ranks are compared on the
``jit_traces`` that ``run`` fingerprints from the traces Thunder keeps; the
assertions hold for either.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

from safe_tracectx.cli import main
from safe_tracectx.combine import pass_runs

TRAIN = """
import sys, warnings
warnings.simplefilter("ignore")
import torch, torch.distributed as tdist, thunder
import thunder.distributed

class Model(torch.nn.Module):
    def __init__(self, branch):
        super().__init__()
        self.l1, self.l2, self.branch = torch.nn.Linear(8, 16), torch.nn.Linear(16, 4), branch

    def forward(self, x):
        h = torch.relu(self.l1(x))
        if self.branch and tdist.get_rank() == 1:
            h = h * 2  # an extra operation on rank 1 only
        return self.l2(h)

tdist.init_process_group("gloo")
torch.manual_seed(0)
model = thunder.distributed.ddp(thunder.jit(Model(branch=sys.argv[1:] == ["branch"])))
model(torch.randn(4, 8)).sum().backward()
tdist.destroy_process_group()
"""


def _torchrun(folder: Path, *command: str) -> subprocess.CompletedProcess[str]:
    (folder / "train.py").write_text(textwrap.dedent(TRAIN))
    launch = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", "2"]
    run = subprocess.run([*launch, *command], cwd=folder, capture_output=True, text=True, timeout=300,
                         env={**__import__("os").environ, "OMP_NUM_THREADS": "1"})
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    return run


def _combined(folder: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    assert sorted(p.name for p in folder.glob(".safe-tracectx.rank*.json")) == [".safe-tracectx.rank0.json", ".safe-tracectx.rank1.json"]
    monkeypatch.chdir(folder)
    capsys.readouterr()
    assert main(["combine"]) == 0
    combined: dict[str, Any] = json.loads((folder / ".safe-tracectx.json").read_text())
    assert [m["name"] for m in combined["members"]] == ["rank 0", "rank 1"] and combined["world_size"] == 2
    return combined


@pytest.mark.slow
def test_ddp_ranks_agree(tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    run = _torchrun(tmp_path, "-m", "safe_tracectx", "run", "train.py")
    for rank in (0, 1):
        assert f"[safe-tracectx] rank {rank}/2" in run.stdout and f".safe-tracectx.rank{rank}.json" in run.stdout
    assert "safe-tracectx audit report" not in run.stdout  # a short summary per rank, not two full reports
    combined = _combined(tmp_path, capsys, monkeypatch)
    assert combined["divergences"] == []
    audit = combined["members"][0]["audit"]
    backward = [symbol for r in audit["jit_traces"] if r["role"] == "backward" for t in r["fingerprints"] for symbol, *_ in t]
    assert any("all_reduce" in symbol for symbol in backward)  # DDP's gradient all-reduce, in the backward trace
    compared = [symbol for r in pass_runs(audit) for t in r["fingerprints"] for symbol, *_ in t]
    assert any("all_reduce" in symbol for symbol in compared)  # and in what combine compared
    assert "rank divergence: 0 (none)" in capsys.readouterr().out
    assert main(["report", "--html", str(tmp_path / "html")]) == 0
    text = capsys.readouterr().out
    assert "safe-tracectx combined report" in text and "Rank divergence (0)" in text
    assert (tmp_path / "html" / "index.html").exists()


@pytest.mark.slow
def test_a_rank_dependent_branch_is_reported(tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    script = str(Path(sys.executable).parent / "safe-tracectx")  # the console script, with --no-python
    _torchrun(tmp_path, "--no-python", script, "run", "train.py", "branch")
    combined = _combined(tmp_path, capsys, monkeypatch)
    # where it starts (not carried on from an earlier pass): rank 1's extra mul, in a pass both ranks ran;
    # with pass_runs the tracing pass's other output traces (prologue, epilogue) differ there too, by a name
    first = [d for d in combined["divergences"] if not d["carried"]]
    [divergence] = [d for d in first if d["had"]["rank 1"] and d["had"]["rank 1"][0] == "mul"]
    labels = [r["label"] for r in pass_runs(combined["members"][1]["audit"])]
    assert divergence["pass"] in labels and isinstance(divergence["index"], int)
    assert divergence["had"]["rank 0"][0] != "mul" and "symbol" in divergence["differs"]
    printed = capsys.readouterr().out
    assert f"pass {divergence['pass']!r}" in printed and f"bound symbol {divergence['index']}" in printed
