"""``report`` and ``combine`` read every document safe-tracectx writes: the pytest plugin's report (a section, a
member, an HTML column per test), standard input, and a newer or older version named as such."""

from __future__ import annotations

import copy
import io
import json
import re
import warnings
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from safe_tracectx.auditlog.documents import AUDIT_SCHEMA, DataFileError, validate
from safe_tracectx.auditlog.log import AuditLog
from safe_tracectx.cli import main
from safe_tracectx.exitcodes import ExitStatus
from safe_tracectx.report.html import write_html
from safe_tracectx.report.pytest_document import render_pytest
from safe_tracectx.report.ranks import render_combined
from safe_tracectx.report.text import render_text

TESTS = """
import warnings
warnings.simplefilter("ignore")
from thunder.core.trace import TraceCtx, set_tracectx, reset_tracectx

def test_clean():
    token = set_tracectx(TraceCtx())
    reset_tracectx(token)

def test_leaks_a_set():
    set_tracectx(TraceCtx())  # never reset
"""


def test_the_readme_pytest_command_and_report_work_together(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """README: `pytest --safe-tracectx=audit --safe-tracectx-report=audit.json`, then `safe-tracectx report audit.json`."""
    pytester.makepyfile(test_seeded=TESTS)
    result = pytester.runpytest_subprocess("--safe-tracectx=audit", "--safe-tracectx-report=audit.json", "-p", "no:cacheprovider")
    assert result.ret == 0
    monkeypatch.chdir(pytester.path)
    capsys.readouterr()
    assert main(["report", "audit.json"]) == ExitStatus.OK
    text = capsys.readouterr().out
    assert text.startswith("safe-tracectx pytest report\n")
    assert "mode audit: 2 tests audited, 0 proxies created, 2 trace sets; 1 test with violations" in text
    clean, leaky = text.split("\ntest_seeded.py::test_clean\n")[1].split("\ntest_seeded.py::test_leaks_a_set\n")
    assert "sets 1, resets 1, never reset 0" in clean and "Unbalanced" not in clean
    assert "sets 1, resets 0, never reset 1" in leaky and "never reset: set_tracectx(" in leaky
    assert "[UnbalancedContextError, " in leaky and "fix: " in leaky

    assert main(["report", "audit.json", "--html", "html"]) == ExitStatus.OK
    capsys.readouterr()
    index = (pytester.path / "html" / "index.html").read_text()
    assert "test_seeded.py::test_clean" in index and "test_seeded.py::test_leaks_a_set" in index  # a member per test
    assert index.count("UnbalancedContextError") == 1  # the leaky test's violation, once

    assert main(["combine", "audit.json", "-o", "combined.json"]) == ExitStatus.OK
    assert "combined 2 members of 1 data file (test_seeded.py::test_clean, test_seeded.py::test_leaks_a_set)" in capsys.readouterr().out
    members = json.loads((pytester.path / "combined.json").read_text())["members"]
    assert [(m["name"], len(m["audit"]["leaked_sets"])) for m in members] == [
        ("test_seeded.py::test_clean", 0), ("test_seeded.py::test_leaks_a_set", 1)]


#: What a document damaged beyond its top-level keys is called: its pass runs' shape is checked when it is read,
#: the rest when a report cannot render it.
DAMAGED_DEEPER = (r"(cannot render it \((TypeError|KeyError|AttributeError): |"
                  r"'(pass_runs|jit_traces)'(: the fingerprints of pass run 'x')? must )")


def _audit(version: object = 2) -> dict[str, object]:
    return {"schema": "safe-tracectx/audit", "version": version, "counts": {}, "kept": 0, "dropped": 0, "passes": {},
            "proxies_by_pass": {}, "call_sites": [], "leaked_sets": [], "violations": []}


@pytest.mark.parametrize("command", [["report"], ["combine", "-o", "out.json"]])
def test_a_newer_version_says_upgrade_and_an_older_one_says_so_not_damaged(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], command: list[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "new.json").write_text(json.dumps(_audit(3)))
    (tmp_path / "old.json").write_text(json.dumps(_audit(1)))
    assert main([*command, "new.json"]) == ExitStatus.USAGE_ERROR
    err = capsys.readouterr().err
    assert "new.json was written by a newer safe-tracectx (safe-tracectx/audit version 3; this one reads version 2): " \
           "upgrade safe-tracectx to read it" in err and "damaged" not in err
    assert main([*command, "old.json"]) == ExitStatus.USAGE_ERROR
    err = capsys.readouterr().err
    assert "old.json was written by an older safe-tracectx (safe-tracectx/audit version 1" in err and "damaged" not in err


def test_report_dash_reads_the_document_from_standard_input(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr("sys.stdin", io.StringIO(json.dumps(_audit())))
    assert main(["report", "-"]) == ExitStatus.OK
    assert capsys.readouterr().out.startswith("safe-tracectx audit report\n")
    monkeypatch.setattr("sys.stdin", io.StringIO("[]"))
    assert main(["report", "-"]) == ExitStatus.USAGE_ERROR
    assert "- is not a safe-tracectx data file" in capsys.readouterr().err


# ---- a damaged audit --------------------------------------------------------------------------------

def test_report_calls_an_audit_without_a_version_damaged(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "a.json").write_text('{"schema": "safe-tracectx/audit"}')
    assert main(["report", str(tmp_path / "a.json")]) == 2
    assert "is a damaged safe-tracectx data file: version None" in capsys.readouterr().err


def _combined(version: object = 1) -> dict[str, object]:
    return {"schema": "safe-tracectx/combined", "version": version, "world_size": None, "events": "all",
            "members": [], "divergences": []}


def _pytest_report(version: object = 2) -> dict[str, object]:
    return {"schema": "safe-tracectx/pytest", "version": version, "mode": "audit", "tests": {}}


def _write_html_into(folder: Path) -> Callable[[Mapping[str, object]], object]:
    return lambda document: write_html(document, folder)


ENTRY_POINTS: list[tuple[str, Callable[[Mapping[str, object]], object], Callable[..., dict[str, object]]]] = [
    ("render_text()", render_text, _audit),
    ("render_combined()", render_combined, _combined),
    ("render_pytest()", render_pytest, _pytest_report),
]


@pytest.mark.parametrize(("name", "render", "document"), ENTRY_POINTS + [("write_html()", write_html, _audit)],
                         ids=lambda value: value if isinstance(value, str) else "")
def test_a_report_called_from_python_says_an_old_or_newer_document_is_so_and_what_to_do(
    tmp_path: Path, name: str, render: Callable[..., object], document: Callable[..., dict[str, object]]
) -> None:
    args = (tmp_path / "html",) if render is write_html else ()
    version = document()["version"]
    assert isinstance(version, int)
    with pytest.raises(DataFileError) as older:
        render(document(version - 1), *args)
    assert str(older.value).startswith(f"the document given to {name} was written by an older safe-tracectx")
    assert "write it again with this safe-tracectx" in str(older.value) and "damaged" not in str(older.value)
    with pytest.raises(DataFileError) as newer:
        render(document(version + 1), *args)
    assert "was written by a newer safe-tracectx" in str(newer.value) and "upgrade safe-tracectx" in str(newer.value)
    assert not (tmp_path / "html").exists()  # refused before anything is written
    render(document(), *args)  # the version it reads: no error


@pytest.mark.parametrize("render", [render_text, render_combined, render_pytest, _write_html_into(Path("unused"))])
def test_a_report_called_from_python_refuses_a_foreign_document_saying_what_writes_one(
    render: Callable[[Mapping[str, object]], object]
) -> None:
    foreigners: list[object] = [{"counts": {}, "violations": []}, {"schema": "coverage", "version": 7}, ["a", "list"]]
    for foreign in foreigners:
        with pytest.raises(DataFileError, match=r"^the document given to \w+\(\) is not a safe-tracectx data file "
                                                r"\(AuditLog.to_dict\(\) makes one, run --json FILE"):
            render(foreign)  # type: ignore[arg-type]  # what a caller may pass all the same


def test_a_report_given_a_document_of_another_schema_names_the_one_that_reads_it() -> None:
    with pytest.raises(DataFileError) as error:
        render_text(_combined())
    assert str(error.value) == ("the document given to render_text() is a combined file, not a safe-tracectx data "
                                "file: give it to safe_tracectx.report.ranks.render_combined")
    with pytest.raises(DataFileError, match="is a safe-tracectx pytest report, not a safe-tracectx data file or "
                                            "combined file: give it to safe_tracectx.report.pytest_document.render_pytest"):
        write_html(_pytest_report(), "unused")


def test_a_damaged_audit_is_named_so_from_python_and_by_combine_not_a_key_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    damaged = {key: value for key, value in _audit().items() if key != "counts"}
    with pytest.raises(DataFileError, match=r"^the document given to render_text\(\) is a damaged safe-tracectx data "
                                            r"file: 'counts' is missing or not a dict$"):
        render_text(damaged)
    monkeypatch.chdir(tmp_path)
    (tmp_path / "damaged.json").write_text(json.dumps(damaged))
    assert main(["combine", "damaged.json", "-o", "out.json"]) == ExitStatus.USAGE_ERROR
    assert "damaged.json is a damaged safe-tracectx data file: 'counts' is missing or not a dict" in capsys.readouterr().err
    assert not (tmp_path / "out.json").exists()


def test_a_live_audit_log_document_is_what_the_reader_reads_back() -> None:
    document = AuditLog().to_dict()
    assert validate(document, "live", (AUDIT_SCHEMA,)) is document
    assert validate(json.loads(json.dumps(document)), "saved", (AUDIT_SCHEMA,)) == document


@pytest.mark.parametrize(
    "damage",
    [{"call_sites": [1]}, {"call_sites": [{"site": 3, "pass": "p", "count": 1}]}, {"violations": [{}]},
     {"leaked_sets": [1]}, {"passes": {"x": 1}}],
)
def test_an_audit_damaged_deeper_than_its_keys_is_named_so_from_python_and_by_report_not_a_bare_error(
    damage: dict[str, object], tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    document = {**_audit(), **damage}
    with pytest.raises(DataFileError, match=r"^the document given to render_text\(\) is a damaged safe-tracectx data "
                                            r"file: " + DAMAGED_DEEPER):
        render_text(document)
    monkeypatch.chdir(tmp_path)
    (tmp_path / "damaged.json").write_text(json.dumps(document))
    assert main(["report", "damaged.json"]) == ExitStatus.USAGE_ERROR
    assert re.search("error: damaged.json is a damaged safe-tracectx data file: " + DAMAGED_DEEPER, capsys.readouterr().err)


def test_a_combined_file_whose_member_is_damaged_deeper_than_checked_is_named_so_from_python() -> None:
    member = {"name": "rank 0", "source": "a.json", "audit": {**_audit(), "passes": {"x": 1}}}
    with pytest.raises(DataFileError, match=r"^the document given to render_combined\(\) is a damaged combined file: "
                                            r"cannot render it \((TypeError|AttributeError): "):
        render_combined({**_combined(), "members": [member]})


@pytest.mark.parametrize(
    "damage",
    [{"child_processes": {}}, {"pass_runs": 5}, {"jit_traces": [{"label": "x", "fingerprints": 3}]},
     {"pass_runs": [{"label": "x", "fingerprints": [[["sin", 3]]], "output_ids": [1]}]},
     {"pass_runs": [{"label": "x", "input_ids": [1], "violations": [{}]}]}],
)
def test_write_html_names_an_audit_damaged_deeper_than_its_keys_and_writes_nothing(
    damage: dict[str, object], tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    document = {**_audit(), **damage}
    with pytest.raises(DataFileError, match=r"^the document given to write_html\(\) is a damaged safe-tracectx data "
                                            r"file: " + DAMAGED_DEEPER):
        write_html(document, tmp_path / "html")
    assert not (tmp_path / "html").exists()  # no style.css or index.html of a report that failed half way
    (tmp_path / "kept").mkdir()
    (tmp_path / "kept" / "notes.txt").write_text("mine")
    with pytest.raises(DataFileError):
        write_html(document, tmp_path / "kept")
    assert [p.name for p in (tmp_path / "kept").iterdir()] == ["notes.txt"]
    monkeypatch.chdir(tmp_path)
    (tmp_path / "damaged.json").write_text(json.dumps(document))
    status = main(["report", "damaged.json", "--html", "out"])
    err = capsys.readouterr().err
    assert status == ExitStatus.USAGE_ERROR and "Traceback" not in err
    assert re.search("error: damaged.json is a damaged safe-tracectx data file: " + DAMAGED_DEEPER, err)


def test_a_number_too_large_for_a_float_is_a_damaged_document_not_an_overflow_error() -> None:
    phase = {"label": "a", "kind": "k", "runs": 1, "seconds": 10**400, "proxies": 1, "by_role": {"forward": 1, "backward": 1}}
    with pytest.raises(DataFileError, match=r"is a damaged safe-tracectx data file: cannot render it \(OverflowError: "):
        render_text({**_audit(), "phases": [phase]})


def test_json_nested_too_deeply_is_a_file_that_cannot_be_read_not_a_recursion_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "deep.json").write_text("[" * 100_000 + "]" * 100_000)
    assert main(["report", "deep.json"]) == ExitStatus.USAGE_ERROR
    assert "cannot read deep.json: its JSON is nested too deeply" in capsys.readouterr().err
    assert main(["combine", "deep.json", "-o", "out.json"]) == ExitStatus.USAGE_ERROR
    assert "cannot read deep.json: its JSON is nested too deeply" in capsys.readouterr().err
    assert not (tmp_path / "out.json").exists()


def _combined_of(audit: dict[str, object]) -> dict[str, object]:
    return {**_combined(), "members": [{"name": "rank 0", "source": "a.json", "audit": audit}]}


@pytest.mark.parametrize("html", [False, True], ids=["render_combined", "write_html"])
def test_a_combined_file_holding_a_member_of_a_newer_version_says_upgrade_not_zeros(html: bool, tmp_path: Path) -> None:
    """The combined schema's version can stay while the audit's grows: its members' versions are checked too."""
    render: Callable[[Mapping[str, object]], object] = _write_html_into(tmp_path / "html") if html else render_combined
    with pytest.raises(DataFileError) as newer:
        render(_combined_of(_audit(3)))
    assert str(newer.value).endswith(" holds a member (rank 0) that was written by a newer safe-tracectx "
                                     "(safe-tracectx/audit version 3; this one reads version 2): upgrade safe-tracectx to read it")
    assert "damaged" not in str(newer.value)
    foreigns: tuple[tuple[dict[str, object], str], ...] = (({"counts": {}}, "is not a safe-tracectx data file (its schema is None)"),
                             ({**_audit(), "violations": {}}, "is damaged: 'violations' is not a list"),
                             ({**_audit(), "counts": {"trace_set": "2"}}, "is damaged: 'counts' holds something other"))
    for foreign, problem in foreigns:
        with pytest.raises(DataFileError, match=r"is a damaged combined file: its member 'rank 0' " + problem.replace("(", r"\(").replace(")", r"\)")):
            render(_combined_of(foreign))
    render(_combined_of({key: value for key, value in _audit().items() if key != "call_sites"}))  # a test's: fine


def test_combine_refuses_a_combined_file_holding_a_newer_member_and_writes_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "c.json").write_text(json.dumps(_combined_of(_audit(3))))
    assert main(["combine", "c.json", "-o", "out.json"]) == ExitStatus.USAGE_ERROR
    assert "c.json holds a member (rank 0) that was written by a newer safe-tracectx" in capsys.readouterr().err
    assert not (tmp_path / "out.json").exists()
    assert main(["report", "c.json"]) == ExitStatus.USAGE_ERROR
    assert "upgrade safe-tracectx to read it" in capsys.readouterr().err


# ---- any one value of a real document damaged: report and combine name the file, never a traceback ----------------

def _real_audit() -> dict[str, Any]:
    import torch

    from safe_tracectx.hooks import audit

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        import thunder
    with audit() as log:
        thunder.jit(lambda x: (x.sin() * 2).sum())(torch.ones(3, requires_grad=True)).backward()
    document: dict[str, Any] = json.loads(json.dumps(log.to_dict(), default=str))
    return document


REAL = _real_audit()


def _paths(value: object, path: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """Each place in ``value`` (dict keys, a list's first item), to depth 5."""
    found: list[tuple[Any, ...]] = []
    if isinstance(value, dict):
        items: list[tuple[Any, object]] = list(value.items())
    elif isinstance(value, list) and value:
        items = [(0, value[0])]
    else:
        return found
    for key, item in items:
        found.append((*path, key))
        if len(path) < 5:
            found += _paths(item, (*path, key))
    return found


WRONG_VALUES: list[object] = [None, 1, 1.5, "x", [], {}, [1], {"a": 1}, True, [None], [{}], [[1]], [[[1]]]]


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(place=st.sampled_from(_paths(REAL)), wrong=st.sampled_from(WRONG_VALUES))
def test_a_real_document_with_any_value_damaged_is_read_or_named_damaged(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], place: tuple[Any, ...], wrong: object
) -> None:
    damaged = copy.deepcopy(REAL)
    holder: Any = damaged
    for key in place[:-1]:
        holder = holder[key]
    holder[place[-1]] = wrong
    (tmp_path / "good.json").write_text(json.dumps(REAL))
    (tmp_path / "bad.json").write_text(json.dumps(damaged))
    for command in (["report", str(tmp_path / "bad.json")],
                    ["report", "--html", str(tmp_path / "html"), str(tmp_path / "bad.json")],
                    ["combine", "-o", str(tmp_path / "c.json"), str(tmp_path / "good.json"), str(tmp_path / "bad.json")]):
        status = main(command)
        err = capsys.readouterr().err
        assert status in (ExitStatus.OK, ExitStatus.USAGE_ERROR), (command, place, wrong)
        if status == ExitStatus.USAGE_ERROR:
            assert "bad.json" in err and ("damaged" in err or "not a safe-tracectx data file" in err), err
