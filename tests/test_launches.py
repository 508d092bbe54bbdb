"""combine names data files of different launches (world sizes, run ids, torchrun agents that disagree)
instead of merging them; each rank's data file records its launch, as torchrun's environment says."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest
from multirank_docs import BASE, audit_document, pass_run

from safe_tracectx.auditlog.document_types import AuditDocument, CombinedDocument
from safe_tracectx.auditlog.combine import combine, member_document
from safe_tracectx.auditlog.launches import MixedLaunchError
from safe_tracectx.cli import main
from safe_tracectx.exitcodes import ExitStatus


def _rank(rank: int, world_size: int, *, run_id: str | None = "r1", host: str = "node", started: float | None = 100.0) -> AuditDocument:
    document = audit_document(rank, [pass_run("trace", BASE)], world_size=world_size)
    document["rank"]["host"] = host
    if run_id is not None:
        document["rank"]["launch"] = {"run_id": run_id, "master": "node:29500", "restart": 0, "started": started}
    return document


def _combine(*documents: AuditDocument) -> CombinedDocument:
    return combine([member_document(d, f"f{i}.json") for i, d in enumerate(documents)])


def test_one_launch_over_several_hosts_combines() -> None:
    combined = _combine(_rank(0, 2, host="a", started=1.0), _rank(1, 2, host="b", started=7.5))
    assert [m["name"] for m in combined["members"]] == ["rank 0", "rank 1"]


def test_ranks_of_different_run_ids_are_named_with_their_files() -> None:
    with pytest.raises(MixedLaunchError) as error:
        _combine(_rank(0, 2, run_id="r1"), _rank(1, 2, run_id="r2"))
    assert "the data files are of 2 launches (their run id differs): world size 2, run id r1, master node:29500, " \
           "restart 0: f0.json; world size 2, run id r2, master node:29500, restart 0: f1.json" in str(error.value)
    assert "remove the data files of the other launch" in str(error.value)


def test_an_older_file_without_a_launch_is_told_by_its_world_size() -> None:
    with pytest.raises(MixedLaunchError, match=r"their world size differs\): world size 2: f0.json; world size 4: f1.json"):
        _combine(_rank(0, 2), _rank(3, 4, run_id=None))
    _combine(_rank(0, 2), _rank(1, 2, run_id=None))  # what both record agrees: one launch


def test_ranks_of_one_host_whose_agents_started_apart_are_of_two_launches() -> None:
    """torchrun without --standalone: run id "none" and port 29500 every time; the agent tells the launches apart."""
    with pytest.raises(MixedLaunchError, match="the torchrun agents that started them on one host differ") as error:
        _combine(_rank(0, 2, started=1.0), _rank(1, 2, started=1.0), _rank(2, 2, started=1800.0))
    assert "host node, launcher started 1970-01-01 00:00:01 UTC: f0.json, f1.json; " \
           "host node, launcher started 1970-01-01 00:30:00 UTC: f2.json" in str(error.value)


def test_combine_refuses_a_stale_rank_of_a_bigger_earlier_job_in_the_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    for rank, world_size in ((0, 2), (1, 2), (2, 3)):  # rank 2 is left over from a launch of 3
        Path(f".safe-tracectx.rank{rank}.json").write_text(json.dumps(_rank(rank, world_size, run_id=None)))
    assert main(["combine"]) == ExitStatus.USAGE_ERROR
    err = capsys.readouterr().err
    assert "world size 2: .safe-tracectx.rank0.json, .safe-tracectx.rank1.json; world size 3: .safe-tracectx.rank2.json" in err
    assert not Path(".safe-tracectx.json").exists()
    os.remove(".safe-tracectx.rank2.json")
    assert main(["combine"]) == ExitStatus.OK


WORKER = """
import sys
from safe_tracectx.auditlog.log import AuditLog
from safe_tracectx.cli.outputs import finish_run
from safe_tracectx.auditlog.ranks import rank_info

finish_run(AuditLog().to_dict(), info=rank_info(), json_path=None, data_file=None, html_dir=None, top=0, stream=sys.stdout)
"""


@pytest.mark.slow
def test_two_torchrun_launches_into_one_folder_are_told_apart(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """What `run` writes after the program, under real torchrun launches of 3, then 2 processes."""
    (tmp_path / "worker.py").write_text(textwrap.dedent(WORKER))
    for processes in (3, 2):
        launch = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", str(processes), "worker.py"]
        done = subprocess.run(launch, cwd=tmp_path, capture_output=True, text=True, timeout=300,
                              env={**os.environ, "OMP_NUM_THREADS": "1"})
        assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    ranks = [json.loads((tmp_path / f".safe-tracectx.rank{r}.json").read_text())["rank"] for r in range(3)]
    assert [r["world_size"] for r in ranks] == [2, 2, 3]
    assert ranks[0]["launch"] == ranks[1]["launch"] != ranks[2]["launch"]
    assert ranks[0]["launch"]["run_id"] and ranks[0]["launch"]["master"] and ranks[0]["launch"]["restart"] == 0
    monkeypatch.chdir(tmp_path)
    assert main(["combine"]) == ExitStatus.USAGE_ERROR
    err = capsys.readouterr().err
    assert "the data files are of 2 launches (their world size, run id and master differ)" in err
    assert ": .safe-tracectx.rank0.json, .safe-tracectx.rank1.json; world size 3, " in err
    assert err.rstrip().endswith(": .safe-tracectx.rank2.json; remove the data files of the other launch (a stale rank "
                                 "of an earlier, bigger job is one), or combine only the files of one launch: "
                                 "safe-tracectx combine FILE ...")
