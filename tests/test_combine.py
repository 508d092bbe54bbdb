"""safe-tracectx combine: per-rank data files merged, ranks compared pass by pass; report with per-rank columns."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path

import pytest
from multirank_docs import BASE, BRANCHED, REMAT, audit_document, pass_run, rank_documents, row

from safe_tracectx.auditlog.combine import COMBINED_SCHEMA, DataFileError, combine, load_members, member_document
from safe_tracectx.auditlog.ranks import RankInfo, rank_info
from safe_tracectx.cli import main
from safe_tracectx.cli.outputs import rank_data_file


def _write(folder: Path, documents: Sequence[Mapping[str, object]]) -> list[Path]:
    paths = []
    for number, document in enumerate(documents):
        path = folder / f".safe-tracectx.rank{number}.json"
        path.write_text(json.dumps(document))
        paths.append(path)
    return paths


def test_identical_ranks_report_no_divergence() -> None:
    combined = combine([member_document(d, f"r{i}") for i, d in enumerate(rank_documents(8))])
    assert combined["schema"] == COMBINED_SCHEMA and combined["world_size"] == 8
    assert [m["name"] for m in combined["members"]] == [f"rank {i}" for i in range(8)]
    assert combined["divergences"] == []


def test_a_rank_dependent_branch_is_reported_at_its_pass_and_first_symbol() -> None:
    combined = combine([member_document(d, f"r{i}") for i, d in enumerate(rank_documents(4, branch_on=1))])
    [divergence] = combined["divergences"]
    assert divergence["pass"] == "fusion" and divergence["occurrence"] == 0 and divergence["trace"] == 0
    assert divergence["index"] == 2 and not divergence["carried"] and divergence["differs"] == ["symbol"]
    had_0, had_1 = divergence["had"]["rank 0"], divergence["had"]["rank 1"]
    assert had_0 is not None and had_1 is not None and had_0[0] == "cos" and had_1[0] == "mul"
    assert "'fusion'" in divergence["message"] and "bound symbol 2" in divergence["message"]
    assert "rank 1: mul -> t1[2] float32" in divergence["message"]


def test_a_pass_missing_on_a_rank_and_a_later_carried_divergence() -> None:
    docs = rank_documents(2)
    docs[1]["pass_runs"] = [pass_run("trace", BASE + [row("neg", "t9")]), pass_run("fusion", REMAT)]
    docs[1]["pass_runs"].append(pass_run("extra", BASE))
    found = combine([member_document(d, "f") for d in docs])["divergences"]
    assert [(d["pass"], d["index"], d["carried"]) for d in found] == [("trace", 3, False), ("extra", None, True)]
    assert found[1]["had"] == {"rank 0": None}


def test_occurrences_of_a_label_are_compared_in_order() -> None:
    docs = [audit_document(r, [pass_run("remat", BASE), pass_run("remat", REMAT if r == 0 else BASE)]) for r in (0, 1)]
    [divergence] = combine([member_document(d, "f") for d in docs])["divergences"]
    assert divergence["occurrence"] == 1 and divergence["index"] == 2 and "(run 2)" in divergence["message"]


def test_jit_traces_stand_in_for_pass_runs_until_they_are_recorded() -> None:
    docs = rank_documents(2, branch_on=1)
    for doc in docs:
        doc["jit_traces"] = doc.pop("pass_runs")
    assert len(combine([member_document(d, "f") for d in docs])["divergences"]) == 1
    docs[0]["pass_runs"], docs[1]["pass_runs"] = [pass_run("x", BASE)], [pass_run("x", BASE)]  # pass_runs win
    assert combine([member_document(d, "f") for d in docs])["divergences"] == []


def test_several_runs_of_one_process_get_distinct_names(tmp_path: Path) -> None:
    a, b = tmp_path / "a.json", tmp_path / "b.json"
    a.write_text(json.dumps(audit_document(None, [pass_run("t", BASE)])))
    b.write_text(json.dumps(audit_document(None, [pass_run("t", REMAT)])))
    combined = combine(load_members([a, b]))
    assert [m["name"] for m in combined["members"]] == ["a.json", "b.json"] and combined["world_size"] is None
    assert len(combined["divergences"]) == 1
    c, d = tmp_path / "c.json", tmp_path / "d.json"
    c.write_text(json.dumps(audit_document(0, [])))
    d.write_text(json.dumps(audit_document(0, [])))
    names = [m["name"] for m in combine(load_members([c, d]))["members"]]
    assert names == ["rank 0 (run 1, c.json)", "rank 0 (run 2, d.json)"]


def test_load_rejects_what_is_not_a_data_file(tmp_path: Path) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text('{"schema": "other"}')
    with pytest.raises(DataFileError, match="not a safe-tracectx data file"):
        load_members([bad])
    with pytest.raises(DataFileError, match="cannot read"):
        load_members([tmp_path / "missing.json"])


def test_combine_command_reads_a_folder_and_report_shows_rank_columns(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    _write(tmp_path, rank_documents(2, branch_on=1))
    out_file = tmp_path / "combined.json"
    assert main(["combine", str(tmp_path), "-o", str(out_file)]) == 0
    printed = capsys.readouterr().out
    assert "combined 2 data files (rank 0, rank 1)" in printed and "rank divergence: 1" in printed
    assert main(["combine", str(tmp_path), "-o", str(out_file), "--fail-on-divergence"]) == 1
    capsys.readouterr()
    assert main(["report", str(out_file)]) == 0
    text = capsys.readouterr().out
    assert "safe-tracectx combined report" in text
    header = next(line for line in text.splitlines() if "rank 0" in line and "rank 1" in line)
    assert header.split() == ["rank", "0", "rank", "1"]
    assert "Rank divergence (1)" in text and "bound symbol 2" in text
    assert main(["report", str(out_file), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["schema"] == COMBINED_SCHEMA
    # combining a combined file with nothing else gives the same members back
    again = tmp_path / "again.json"
    assert main(["combine", str(out_file), "-o", str(again)]) == 0
    assert [m["name"] for m in json.loads(again.read_text())["members"]] == ["rank 0", "rank 1"]


def test_combine_usage_errors(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.chdir(tmp_path)
    assert main(["combine"]) == 2 and "no data files" in capsys.readouterr().err
    (tmp_path / "x.json").write_text("[]")
    assert main(["combine", "x.json"]) == 2 and "not a safe-tracectx data file" in capsys.readouterr().err
    assert main(["report", "x.json"]) == 2
    assert main(["report", "nope.json"]) == 2 and "cannot read" in capsys.readouterr().err


def test_combine_refuses_to_overwrite_an_input_or_to_count_one_twice(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    paths = _write(tmp_path, [audit_document(rank, [pass_run("t", BASE)]) for rank in (0, 1)])
    before = [p.read_bytes() for p in paths]
    assert main(["combine", str(paths[0]), str(paths[1]), "-o", str(paths[0])]) == 2
    assert "is one of the data files to combine" in capsys.readouterr().err
    assert main(["combine", str(paths[0]), f"./{paths[0].name}"]) == 2
    assert "given twice" in capsys.readouterr().err
    assert [p.read_bytes() for p in paths] == before and not (tmp_path / ".safe-tracectx.json").exists()


def test_rank_environment_and_data_file_names() -> None:
    assert rank_info({"RANK": "1", "WORLD_SIZE": "2"}) is not None
    assert rank_info({"RANK": "1"}) is None  # not a launch: WORLD_SIZE is missing
    info = RankInfo(rank=5, world_size=64, local_rank=5, host="h")
    assert rank_data_file("/shared/audit", info) == "/shared/audit.rank5"
    assert rank_data_file("/shared/run.{rank}.json", info) == "/shared/run.5.json"


def test_without_all_events_only_the_first_member_keeps_its_events(tmp_path: Path) -> None:
    event = {"kind": "proxy_created", "site": None, "detail": {"name": "t0"}}
    documents = [audit_document(rank, [pass_run("t", BASE)], events=[event]) for rank in (0, 1)]
    paths = _write(tmp_path, documents)
    slim = combine(load_members(paths, all_events=False), all_events=False)
    assert [len(m["audit"]["events"]) for m in slim["members"]] == [1, 0] and slim["events"] == "first member"
    assert slim["members"][1]["audit"]["counts"] == documents[1]["counts"]
    full = combine(load_members(paths))
    assert [len(m["audit"]["events"]) for m in full["members"]] == [1, 1] and full["events"] == "all"


def test_the_carried_count_is_of_pass_runs_and_the_combined_count_of_what_is_listed(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    docs = rank_documents(2, branch_on=1)  # rank 1 diverges in fusion; a later pass differs in both its traces
    for rank, doc in enumerate(docs):
        later = BRANCHED if rank else REMAT
        doc["pass_runs"].append(pass_run("after", later, later))
    first, second = _write(tmp_path, docs)
    pair = tmp_path / "pair.json"
    assert main(["combine", str(first), str(second), "-o", str(pair)]) == 0
    printed = capsys.readouterr().out
    assert "rank divergence: 3; 1 where it starts, 1 later pass run carrying it on" in printed
    assert main(["report", str(pair)]) == 0
    assert "  carried on by 1 later pass run: after (run 1)\n" in capsys.readouterr().out + "\n"
    third = tmp_path / "later.json"
    third.write_text(json.dumps(audit_document(None, [])))
    assert main(["combine", str(pair), str(third), "-o", str(tmp_path / "all.json")]) == 0
    assert "combined 3 members of 2 data files (rank 0, rank 1, later.json) into" in capsys.readouterr().out


# ---- damaged combined files, and a folder of data files named by run --data-file --------------------

@pytest.mark.parametrize(
    "body",
    ['{"schema":"safe-tracectx/combined"}', '{"schema":"safe-tracectx/combined","members":5}',
     '{"schema":"safe-tracectx/combined","members":[{"x":1}]}'],
)
def test_combine_calls_a_combined_file_without_a_list_of_members_damaged(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], body: str
) -> None:
    (tmp_path / "a.json").write_text(body)
    assert main(["combine", str(tmp_path / "a.json"), "--output", str(tmp_path / "out.json")]) == 2
    assert "is a damaged combined file" in capsys.readouterr().err


def test_combine_of_a_folder_finds_the_files_named_by_run_data_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "prog.py").write_text("pass\n")
    monkeypatch.chdir(tmp_path)
    for rank in (0, 1):
        monkeypatch.setenv("RANK", str(rank))
        monkeypatch.setenv("WORLD_SIZE", "2")
        monkeypatch.setenv("LOCAL_RANK", str(rank))
        assert main(["run", "--data-file", "job42.rank{rank}.json", "prog.py"]) == 0
    monkeypatch.delenv("RANK")
    assert main(["combine", ".", "--output", "all.json"]) == 0
    assert "2" in capsys.readouterr().out and (tmp_path / "all.json").exists()
