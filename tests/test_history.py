"""Thunder's own history as the acceptance test (``history/``): the fast cases, at the parent and at the fix.

Each fast case runs strict with Thunder's package at the fix's parent (the bug)
and at the fix. A case expected to be caught must be stopped at the parent by
our error, with the bug's names and the pass that made it; every case must be
silent at the fix, where the program works. ``make history`` runs every case
plain, strict and audit, and the ordinary programs across versions.
"""

from __future__ import annotations

import concurrent.futures
import textwrap
from pathlib import Path

import pytest

from history.cases import Case, load_case, load_cases
from history.packages import BUNDLE, History
from history.runs import Mode, RunResult, run_program
from history.verdicts import _covers, _reports

pytestmark = pytest.mark.skipif(
    not BUNDLE.is_file(), reason=f"Thunder's history bundle is not at {BUNDLE} (shared/ beside the clone)"
)

FAST = [case for case in load_cases() if case.fast]


@pytest.fixture(scope="module")
def strict_runs() -> dict[tuple[str, str], RunResult]:
    """(case id, "parent" | "fix") -> the strict run, two at a time."""
    history = History()
    tasks = [(case, side, getattr(case, side)) for case in FAST for side in ("parent", "fix")]
    with concurrent.futures.ThreadPoolExecutor(max_workers=2) as pool:
        futures = {
            (case.id, side): pool.submit(run_program, history, case, revision, "strict", test_from=(case.parent, case.fix))
            for case, side, revision in tasks
        }
        return {key: future.result() for key, future in futures.items()}


def test_the_corpus_holds_the_cases_the_acceptance_test_needs() -> None:
    cases = load_cases()
    assert len(cases) >= 20
    assert len(FAST) >= 6
    assert {c.id for c in cases} >= {"pr2317", "pr2764", "pr1632", "pr1622", "pr2090", "pr1885"}
    for case in cases:
        assert case.names or case.expect == "missed", case.id
        assert (case.program is None) != (case.test is None), case.id


@pytest.mark.parametrize("case", FAST, ids=[c.id for c in FAST])
def test_a_fast_case_is_caught_at_the_parent_as_expected_and_silent_at_the_fix(
    case: Case, strict_runs: dict[tuple[str, str], RunResult]
) -> None:
    parent, fix = strict_runs[(case.id, "parent")], strict_runs[(case.id, "fix")]
    for run in (parent, fix):
        assert run.harness_error is None, f"{case.id}: {run.harness_error}\n{run.tail}"
    other_bug = [v for v in fix.violations if case.excused_at_fix(v)]  # the other bug the fix still has, if any
    assert not fix.failed or other_bug, f"{case.id}: strict fails at the fix, where plain Thunder works:\n{fix.tail}"
    reported = [v for v in fix.violations if not case.excused_at_fix(v)]
    assert not reported and not fix.notes, f"{case.id}: reported at the fix: {reported or fix.notes}"
    # strict fails at the parent, or our error stood in for the refusal eager gives and the program checks for
    assert parent.failed or parent.stopped_by_ours, f"{case.id}: passes at the parent"
    if case.expect == "caught":
        assert parent.stopped_by_ours, f"{case.id}: not stopped by our error:\n{parent.tail}"
        assert _covers(case, _reports(parent), with_culprit=True), (
            f"{case.id}: no report names {case.names} and {case.culprit!r}: {parent.violations}"
        )


def test_the_documented_table_has_every_case_with_its_expected_verdict() -> None:
    """docs/history.md is the corpus's table: a case added or changed without its row is found here."""
    text = (Path(__file__).parents[1] / "docs" / "history.md").read_text(encoding="utf-8")
    rows = {cells[2]: cells for line in text.splitlines() if line.startswith("| #")
            for cells in [[c.strip() for c in line.split("|")]]}
    cases = load_cases()
    assert set(rows) == {c.id for c in cases}
    for case in cases:
        assert (rows[case.id][3], rows[case.id][-2]) == (case.expect, "yes" if case.expect == "caught" else "no"), case.id
    caught = sum(case.expect == "caught" for case in cases)
    assert f"caught {caught} of {len(cases)}; not as expected: none" in text
    held = [c for c in cases if c.held_out is not None]
    assert (f"{len(held)} cases were found by a search for fixes of the class after the checks were written, not "
            f"written against: {sum(c.held_out == 'caught' for c in held)} caught when found") in text


def _write_case(folder: Path, name: str, text: str) -> Path:
    path = folder / f"{name}.toml"
    path.write_text(textwrap.dedent(text))
    return path


def test_a_malformed_case_is_refused_naming_its_file_and_what_is_wrong(tmp_path: Path) -> None:
    base = 'pr = 1\nsummary = "s"\nparent = "a^"\nfix = "a"\nnames = ["t0"]\nculprit = "x"\n'
    with pytest.raises(ValueError, match=r"bad\.toml: missing \['culprit'\]"):
        load_case(_write_case(tmp_path, "bad", base.replace('culprit = "x"\n', "") + 'test = "t.py::t"\n'))
    with pytest.raises(ValueError, match=r"both\.toml: give exactly one of program= and test="):
        load_case(_write_case(tmp_path, "both", base + 'test = "t.py::t"\nprogram = "pr2317.py"\n'))
    with pytest.raises(ValueError, match=r"unknown \['colprit'\]"):
        load_case(_write_case(tmp_path, "typo", base + 'test = "t.py::t"\ncolprit = "x"\n'))
    with pytest.raises(ValueError, match="says why in missed_because"):
        load_case(_write_case(tmp_path, "miss", base + 'test = "t.py::t"\nexpect = "missed"\n'))
    with pytest.raises(ValueError, match=r"held_out = 'maybe'; use one of caught, missed"):
        load_case(_write_case(tmp_path, "held", base + 'test = "t.py::t"\nheld_out = "maybe"\n'))
    with pytest.raises(ValueError, match="no program"):
        load_case(_write_case(tmp_path, "gone", base + 'program = "no_such_program.py"\n'))
    case = load_case(_write_case(tmp_path, "good", base + 'test = "t.py::t"\n'))
    assert (case.id, case.expect, case.names, case.held_out) == ("good", "caught", ("t0",), None)
    held = load_case(_write_case(tmp_path, "found", base + 'test = "t.py::t"\nheld_out = "missed"\n'))
    assert held.held_out == "missed"
    with pytest.raises(ValueError, match="other_bug_at_fix is a table of kind, fixed_by, why"):
        load_case(_write_case(tmp_path, "other", base + 'test = "t.py::t"\n[other_bug_at_fix]\nkind = "x"\n'))


def _run(mode: str, *, failed: bool, ours: str | None = None, kinds: tuple[str, ...] = ()) -> RunResult:
    return RunResult(mode, "c0ffee", 1 if failed else 0, 1.0, ours, None,  # type: ignore[arg-type]
                     [{"message": f"{k} found", "names": ["t3"], "culprit": "bind_inputs", "kind": k} for k in kinds],
                     [], "")


def test_the_other_bug_a_fix_commit_still_has_is_counted_apart_and_nothing_else_is() -> None:
    """pr2479's fix still has #2499's bug, which its test runs into: strict raising grad-mode-lost there is that bug's;
    a report of any other kind at the fix is still one."""
    from history.verdicts import judge

    case = next(c for c in load_cases() if c.id == "pr2479")
    assert case.other_bug_at_fix is not None and case.other_bug_at_fix["kind"] == "grad-mode-lost"
    parent: dict[Mode, RunResult] = {"plain": _run("plain", failed=True), "audit": _run("audit", failed=True, kinds=("detached-under-grad",)),
              "strict": _run("strict", failed=True, ours="BrokenTraceError", kinds=("detached-under-grad",))}
    other_bug: dict[Mode, RunResult] = {"plain": _run("plain", failed=False), "audit": _run("audit", failed=False, kinds=("grad-mode-lost",)),
                 "strict": _run("strict", failed=True, ours="BrokenTraceError", kinds=("grad-mode-lost",))}
    verdict = judge(case, {"parent": parent, "fix": other_bug})
    assert verdict.caught and verdict.fix_silent == "yes" and verdict.strict_fix.startswith("as plain but for")
    noise: dict[Mode, RunResult] = {**other_bug, "strict": _run("strict", failed=True, ours="BrokenTraceError",
                                         kinds=("grad-mode-lost", "defined-twice"))}
    verdict = judge(case, {"parent": parent, "fix": noise})
    assert not verdict.caught and verdict.fix_silent == "no (1)" and verdict.strict_fix.startswith("differs")


def test_saved_runs_are_judged_again_without_running(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                     capsys: pytest.CaptureFixture[str]) -> None:
    """``--from FILE`` reuses an earlier ``--json FILE``'s runs of the same commits and runs only what is missing."""
    import json

    import history.__main__ as command

    case = next(c for c in load_cases() if c.id == "pr2317")
    history = History()
    commits = {"parent": history.resolve(case.parent), "fix": history.resolve(case.fix)}

    def result(side: str, mode: str) -> dict[str, object]:
        caught = side == "parent" and mode != "plain"
        violation = {"message": "i0 is used before any bound symbol defines it", "names": list(case.names),
                     "culprit": case.culprit, "kind": "use-before-definition"}
        return RunResult(mode, commits[side], 1 if side == "parent" else 0, 1.0,  # type: ignore[arg-type]
                         "UseBeforeDefinitionError" if caught and mode == "strict" else None,
                         None if caught and mode == "strict" else ("UnboundLocalError" if side == "parent" else None),
                         [violation] if caught else [], [], "").to_dict()

    saved = {"corpus": {f"{case.id}/{side}/{mode}": result(side, mode)
                        for side in ("parent", "fix") for mode in ("plain", "strict", "audit")}}
    path = tmp_path / "saved.json"
    path.write_text(json.dumps(saved))

    def must_not_run(*args: object, **kwargs: object) -> RunResult:
        raise AssertionError("a saved run was run again")

    monkeypatch.setattr(command, "run_program", must_not_run)
    assert command.main(["--case", case.id, "--from", str(path)]) == 0
    table = capsys.readouterr().out
    assert "caught 1 of 1; not as expected: none" in table
    del saved["corpus"][f"{case.id}/fix/audit"]
    path.write_text(json.dumps(saved))
    with pytest.raises(AssertionError, match="a saved run was run again"):
        command.main(["--case", case.id, "--from", str(path)])


def test_runs_import_the_checkout_the_runner_is_in(tmp_path: Path) -> None:
    """A run puts the commit's Thunder first and this checkout's ``safe_tracectx`` before what the environment
    installed (a worktree's runner tests the worktree's code, not the editable install's)."""
    import os
    import subprocess
    import sys

    from history.packages import ROOT
    from history.runs import pythonpath

    package = tmp_path / "thunder-at-commit"
    path = pythonpath(package, None, "/elsewhere")
    assert path.split(os.pathsep) == [str(package), str(ROOT), "/elsewhere"]
    found = subprocess.run([sys.executable, "-c", "import safe_tracectx; print(safe_tracectx.__file__)"],
                           env={**os.environ, "PYTHONPATH": path}, cwd=tmp_path, capture_output=True, text=True,
                           check=True).stdout.strip()
    assert Path(found).resolve().is_relative_to(ROOT)
