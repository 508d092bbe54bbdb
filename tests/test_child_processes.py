"""``run`` audits multiprocessing workers (fork, spawn, a DataLoader worker that compiles) or says it did not."""

from __future__ import annotations

import json
import multiprocessing
import os
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path
from typing import Any, cast

import pytest

from safe_tracectx.auditlog.document_types import AuditDocument
from safe_tracectx.auditlog.ranks import RankInfo, rank_summary
from safe_tracectx.cli import main
from safe_tracectx.hooks.children import ChildAuditing

PROGRAM = """
import multiprocessing as mp
import os
import warnings

warnings.simplefilter("ignore")
import torch
import thunder
from thunder.core.trace import TraceCtx, set_tracectx


def leak(i):
    set_tracectx(TraceCtx())  # never reset, in a worker
    return i


def leak_then_exit():
    set_tracectx(TraceCtx())  # never reset, and the worker ends by os._exit without writing its data
    os._exit(0)


class Compiles(torch.utils.data.Dataset):
    def __len__(self):
        return 1

    def __getitem__(self, index):
        return thunder.jit(lambda x: x.sin() * 2)(torch.ones(2))


if __name__ == "__main__":
    loader = torch.utils.data.DataLoader(Compiles(), num_workers=1, multiprocessing_context="fork")
    print("loader", [batch.tolist() for batch in loader])
    with mp.get_context("fork").Pool(2) as pool:  # its end terminates the workers (SIGTERM)
        print("fork", pool.map(leak, [0, 1], chunksize=1))
    with mp.get_context("spawn").Pool(1) as pool:
        print("spawn", pool.map(leak, [2]))
    worker = mp.get_context("fork").Process(target=leak_then_exit)
    worker.start()
    worker.join()
    set_tracectx(TraceCtx())  # never reset, in the parent
"""


@pytest.fixture(scope="module")
def workers(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, dict[str, Any]]:
    """The program run once under ``run --json``: its report, and its document."""
    folder = tmp_path_factory.mktemp("workers")
    (folder / "prog.py").write_text(textwrap.dedent(PROGRAM))
    run = subprocess.run(
        [sys.executable, "-m", "safe_tracectx", "run", "--json", "out.json", "prog.py"],
        cwd=folder, capture_output=True, text=True, timeout=300, env={**os.environ, "OMP_NUM_THREADS": "1"},
    )
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    assert "loader [[[1.68" in run.stdout and "fork [0, 1]" in run.stdout and "spawn [2]" in run.stdout
    return run.stdout, json.loads((folder / "out.json").read_text())


def _children(document: dict[str, Any], method: str) -> list[dict[str, Any]]:
    return [m["audit"] for m in document["child_processes"]["audited"] if m["audit"]["process"]["start_method"] == method]


@pytest.mark.slow
def test_each_worker_records_its_own_leaks(workers: tuple[str, dict[str, Any]]) -> None:
    _, document = workers
    assert len(document["leaked_sets"]) == 1  # the parent's own, not its workers'
    forked = _children(document, "fork")
    pool = [audit for audit in forked if "PoolWorker" in audit["process"]["name"]]
    assert len(pool) == 2 and sum(len(audit["leaked_sets"]) for audit in pool) == 2  # one per task, wherever it ran
    assert all(leaked["site"]["function"] == "leak" for audit in pool for leaked in audit["leaked_sets"])
    [spawned] = _children(document, "spawn")
    assert len(spawned["leaked_sets"]) == 1 and spawned["leaked_sets"][0]["site"]["function"] == "leak"
    assert len(spawned["violations"]) == 1 and spawned["violations"][0]["error"] == "UnbalancedContextError"
    assert spawned["violations"][0]["action"] == "reported at the end"  # nothing raised in the child


@pytest.mark.slow
def test_a_dataloader_worker_that_compiles_is_audited(workers: tuple[str, dict[str, Any]]) -> None:
    _, document = workers
    [loader] = [audit for audit in _children(document, "fork") if "PoolWorker" not in audit["process"]["name"]]
    assert loader["counts"]["proxy_created"] > 0 and loader["pass_runs"]  # Thunder compiled in the worker
    assert loader["leaked_sets"] == [] and loader["violations"] == []
    assert document["counts"].get("proxy_created", 0) == 0  # and none of it is counted in the parent


@pytest.mark.slow
def test_the_report_counts_every_process_and_names_those_not_audited(workers: tuple[str, dict[str, Any]]) -> None:
    stdout, document = workers
    assert document["child_processes"]["not_audited"] == 1  # the worker that ended by os._exit
    assert "sets 1, resets 0, never reset 1\n" in stdout
    assert "child processes: never reset 3 in 4 audited (4 in all); 1 child process was not audited" in stdout
    assert "Child processes (4 audited, 1 not audited)" in stdout
    # a line per child; the pool's two tasks may run in one worker (never reset 2) or one each
    assert stdout.count("(fork): proxies 0, sets") == 2 and "(spawn): proxies 0, sets 1, never reset 1" in stdout


LEAKY_CHILD = """
import multiprocessing as mp
from thunder.core.trace import TraceCtx, set_tracectx

def leak():
    set_tracectx(TraceCtx())

if __name__ == "__main__":
    worker = mp.get_context("fork").Process(target=leak)
    worker.start()
    worker.join()
"""


def test_a_leak_only_in_a_worker_fails_the_run(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    program = tmp_path / "prog.py"
    program.write_text(textwrap.dedent(LEAKY_CHILD))
    assert main(["run", "--fail-on-violation", str(program)]) == 1
    out = capsys.readouterr().out
    assert "never reset 0\n" in out and "child processes: never reset 1 in 1 audited (1 in all)" in out


def test_a_run_without_workers_has_no_child_processes(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    program = tmp_path / "prog.py"
    program.write_text("print('alone')\n")
    (tmp_path / "tmp").mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path / "tmp"))
    assert main(["run", "--json", str(tmp_path / "out.json"), str(program)]) == 0
    assert "child_processes" not in json.loads((tmp_path / "out.json").read_text())
    assert "Child processes" not in capsys.readouterr().out
    assert not list((tmp_path / "tmp").iterdir())  # the children's folder is removed


def test_a_ranks_summary_counts_its_child_processes() -> None:
    child = {"name": "pid 7 ForkPoolWorker-1 (fork)", "source": "child-7.json", "audit": {"leaked_sets": [{}, {}]}}
    document = {"counts": {}, "leaked_sets": [], "child_processes": {"audited": [child], "not_audited": 1}}
    summary = rank_summary(cast(AuditDocument, document), RankInfo(rank=1, world_size=2, local_rank=1, host="node"), None)
    assert "0 sets never reset; child processes: 1 audited (2 sets never reset), 1 not audited" in summary


def _noop() -> None:
    pass


def test_a_run_inside_a_run_hands_the_children_back_to_the_outer_one() -> None:
    fork = multiprocessing.get_context("fork")
    with ChildAuditing(None) as outer:
        with ChildAuditing(None) as inner:
            pass
        worker = fork.Process(target=_noop)
        worker.start()
        worker.join()
        assert inner.collect() is None  # nothing to add to the document
        found = outer.collect()
        assert found is not None
    assert [m["audit"]["process"]["pid"] for m in found["audited"]] == [worker.pid] and found["not_audited"] == 0
    after = ChildAuditing(None)
    worker = fork.Process(target=_noop)
    worker.start()  # no run: not audited, nothing written
    worker.join()
    assert after.collect() is None


SUBCLASS_ONLY = """
import multiprocessing as mp

from thunder.core.trace import TraceCtx, set_tracectx


class Leaks(mp.Process):  # all the script defines: no function at its top level
    def run(self):
        set_tracectx(TraceCtx())


if __name__ == "__main__":
    mp.set_start_method("spawn")
    worker = Leaks()
    worker.start()
    worker.join()
"""


def test_a_spawned_process_subclass_is_audited(tmp_path: Path) -> None:
    """Spawn runs the script in a namespace of its own: the hooks are bound there also for a class's methods."""
    (tmp_path / "prog.py").write_text(textwrap.dedent(SUBCLASS_ONLY))
    run = subprocess.run([sys.executable, "-m", "safe_tracectx", "run", "--json", "out.json", "prog.py"],
                         cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr[-3000:]
    [spawned] = _children(json.loads((tmp_path / "out.json").read_text()), "spawn")
    assert len(spawned["leaked_sets"]) == 1 and spawned["leaked_sets"][0]["site"]["function"] == "Leaks.run"


def test_the_html_report_and_combine_show_the_child_processes(
    workers: tuple[str, dict[str, Any]], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _, document = workers
    for name in ("a.json", "b.json"):
        (tmp_path / name).write_text(json.dumps(document))
    assert main(["report", str(tmp_path / "a.json"), "--html", str(tmp_path / "html")]) == 0
    index = (tmp_path / "html" / "index.html").read_text()
    assert "Child processes of this run (4 audited, 1 not audited)" in index and "in leak [MainThread]" in index
    assert main(["combine", str(tmp_path / "a.json"), str(tmp_path / "b.json"), "-o", str(tmp_path / "c.json")]) == 0
    capsys.readouterr()
    assert main(["report", str(tmp_path / "c.json")]) == 0
    text = capsys.readouterr().out
    assert "Child processes of a.json (4 audited, 1 not audited)" in text and "Child processes of b.json" in text
