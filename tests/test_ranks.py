"""Multi-rank runs: the launch's environment checked, each rank's own file checked, placeholders checked."""

from __future__ import annotations

from pathlib import Path

import pytest

from safe_tracectx.auditlog.ranks import RankEnvironmentError, rank_info
from safe_tracectx.cli import main
from safe_tracectx.cli.outputs import unknown_placeholder
from safe_tracectx.exitcodes import ExitStatus


@pytest.fixture
def program(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)
    path = tmp_path / "prog.py"
    path.write_text("print('the program ran')\n")
    return path


def _launch(monkeypatch: pytest.MonkeyPatch, rank: str, world_size: str = "4", local_rank: str | None = None) -> None:
    monkeypatch.setenv("RANK", rank)
    monkeypatch.setenv("WORLD_SIZE", world_size)
    if local_rank is None:
        monkeypatch.delenv("LOCAL_RANK", raising=False)
    else:
        monkeypatch.setenv("LOCAL_RANK", local_rank)


@pytest.mark.parametrize(
    "environ, message",
    [
        ({"RANK": "abc", "WORLD_SIZE": "4"}, "the environment variable RANK='abc' is not a rank (an integer >= 0)"),
        ({"RANK": "-1", "WORLD_SIZE": "4"}, "the environment variable RANK='-1' is not a rank (an integer >= 0)"),
        ({"RANK": "", "WORLD_SIZE": "4"}, "the environment variable RANK='' is not a rank"),
        ({"RANK": "0", "WORLD_SIZE": "0"}, "the environment variable WORLD_SIZE='0' is not a world size (an integer >= 1)"),
        ({"RANK": "0", "WORLD_SIZE": "two"}, "WORLD_SIZE='two' is not a world size"),
        ({"RANK": "4", "WORLD_SIZE": "4"}, "RANK='4' and WORLD_SIZE='4' disagree: a rank is below the world size"),
        ({"RANK": "1", "WORLD_SIZE": "4", "LOCAL_RANK": "x"}, "LOCAL_RANK='x' is not a local rank (an integer >= 0)"),
    ],
)
def test_a_bogus_launch_environment_is_an_error_naming_the_variable_and_its_value(
    environ: dict[str, str], message: str
) -> None:
    with pytest.raises(RankEnvironmentError, match="unset RANK and WORLD_SIZE for a single-process run") as info:
        rank_info(environ)
    assert message in str(info.value)


@pytest.mark.parametrize("rank", ["abc", "-2"])
def test_run_refuses_a_bogus_rank_before_the_program_runs(
    program: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], rank: str
) -> None:
    _launch(monkeypatch, rank)
    assert main(["run", str(program)]) == ExitStatus.USAGE_ERROR
    captured = capsys.readouterr()
    assert f"error: the environment variable RANK={rank!r} is not a rank" in captured.err
    assert "the program ran" not in captured.out
    assert main(["demo", "--top", "0"]) == ExitStatus.USAGE_ERROR and "RANK=" in capsys.readouterr().err


def test_the_writability_message_names_the_file_of_this_rank(
    program: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    _launch(monkeypatch, "3", local_rank="1")
    assert main(["run", "--data-file", "nowhere/job.rank{rank}.json", str(program)]) == ExitStatus.USAGE_ERROR
    err = capsys.readouterr().err
    assert "--data-file: cannot write nowhere/job.rank3.json: the folder" in err and "rank0" not in err
    assert main(["run", "--data-file", "nowhere/job.json", str(program)]) == ExitStatus.USAGE_ERROR
    assert "--data-file: cannot write nowhere/job.rank3.json" in capsys.readouterr().err
    assert main(["run", "--json", "nowhere/audit-{rank}.json", str(program)]) == ExitStatus.USAGE_ERROR
    assert "--json: cannot write nowhere/audit-3.json" in capsys.readouterr().err
    (program.parent / "out").mkdir()
    assert main(["run", "--data-file", "out/job.rank{rank}.json", str(program)]) == 0
    assert (program.parent / "out" / "job.rank3.json").exists() and "the program ran" in capsys.readouterr().out


@pytest.mark.parametrize("odd", ["{rnak}", "{}", "{RANK}", "{rank", "rank}", "{rank:02d}"])
@pytest.mark.parametrize("option", ["--data-file", "--json"])
def test_an_odd_placeholder_is_a_usage_error_naming_it_and_the_one_accepted(
    program: Path, capsys: pytest.CaptureFixture[str], odd: str, option: str
) -> None:
    path = f"job-{odd}.json"
    assert main(["run", option, path, str(program)]) == ExitStatus.USAGE_ERROR
    captured = capsys.readouterr()
    found = unknown_placeholder(path)
    assert found is not None and found in path and found != "{rank}"
    assert f"{option} {path}: {found} is not a placeholder; the one accepted is {{rank}}" in captured.err
    assert "the program ran" not in captured.out and not list(program.parent.glob("job-*"))


def test_rank_placeholder_outside_a_launch_is_rank_zero_for_json_too(
    program: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.delenv("RANK", raising=False)
    assert main(["run", "--json", "audit-{rank}.json", "--data-file", "data-{rank}.json", str(program)]) == 0
    assert (program.parent / "audit-0.json").exists() and (program.parent / "data-0.json").exists()
    assert "audit log written to audit-0.json" in capsys.readouterr().out


def test_doubled_braces_are_a_literal_brace_so_a_folder_with_braces_can_be_written(
    program: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    folder = program.parent / "run{1}"
    folder.mkdir()
    monkeypatch.delenv("RANK", raising=False)
    assert main(["run", "--data-file", "run{{1}}/data-{rank}.json", "--json", "run{{1}}/{{a}}.json", str(program)]) == 0
    assert (folder / "data-0.json").exists() and (folder / "{a}.json").exists()
    assert "audit log written to run{1}/{a}.json" in capsys.readouterr().out
    _launch(monkeypatch, "3")
    assert main(["run", "--data-file", "run{{1}}/data.json", str(program)]) == 0
    assert (folder / "data.rank3.json").exists()
    assert main(["run", "--data-file", "run{1}/data.json", str(program)]) == ExitStatus.USAGE_ERROR
    assert "{1} is not a placeholder; the one accepted is {rank}" in (err := capsys.readouterr().err)
    assert "write {{ or }} for a literal brace" in err


def test_a_program_that_sets_rank_itself_is_still_a_single_process_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A single-process script often sets RANK/WORLD_SIZE for init_process_group: that is no launch."""
    monkeypatch.chdir(tmp_path)
    for name in ("RANK", "WORLD_SIZE"):  # set, then removed: monkeypatch restores what the program sets too
        monkeypatch.setenv(name, "0")
        monkeypatch.delenv(name)
    script = tmp_path / "single.py"
    script.write_text("import os\nos.environ.setdefault('RANK', '0')\nos.environ.setdefault('WORLD_SIZE', '1')\n")
    assert main(["run", str(script)]) == 0
    out = capsys.readouterr().out
    assert "[safe-tracectx] rank" not in out and "safe-tracectx audit report" in out  # the full report, not a rank's summary
    assert not list(tmp_path.glob(".safe-tracectx.rank*.json"))  # and no data file it was not asked for
