"""The saved documents' one owner: each schema's name and version, their reader and validation, and what every
report reads of them (the types are in ``document_types``).

Three schemas (docs/audit-schema.md, docs/multi-rank.md): a run's audit, a combined
file, and the pytest plugin's per-test report. ``read_document`` reads any of them
from a file or from standard input (``-``); ``validate`` checks one already in memory
(every report's entry point calls it), with the version rules::

    >>> from safe_tracectx.auditlog.documents import version_problem
    >>> version_problem({"schema": "safe-tracectx/audit", "version": 3})  # doctest: +ELLIPSIS
    'was written by a newer safe-tracectx (safe-tracectx/audit version 3; this one reads version 2): upgrade ...'
    >>> version_problem({"schema": "safe-tracectx/audit", "version": 2}) is None
    True
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any, Final, Literal, TypeVar, cast, overload

from safe_tracectx._support.callsite import CallSite, display_path
from safe_tracectx.auditlog.document_types import (
    AuditDocument,
    CombinedDocument,
    Member,
    PassRun,
    PytestDocument,
    Rank,
    RunKey,
    Site,
)

__all__ = [
    "AUDIT_SCHEMA",
    "AUDIT_VERSION",
    "COMBINED_SCHEMA",
    "COMBINED_VERSION",
    "OUTSIDE_PASSES",
    "PYTEST_SCHEMA",
    "PYTEST_VERSION",
    "RENDER_ERRORS",
    "STDIN",
    "DataFileError",
    "Document",
    "damaged",
    "rendered",
    "keyed_runs",
    "member_document",
    "pass_run_document",
    "pass_runs",
    "per_test_audits",
    "rank_number",
    "rank_of",
    "read_document",
    "relative_paths",
    "site_document",
    "site_text",
    "validate",
    "version_problem",
    "write_document",
]

AUDIT_SCHEMA: Final = "safe-tracectx/audit"
AUDIT_VERSION: Final = 2
COMBINED_SCHEMA: Final = "safe-tracectx/combined"
COMBINED_VERSION: Final = 1
PYTEST_SCHEMA: Final = "safe-tracectx/pytest"
PYTEST_VERSION: Final = 2
Schema = Literal["safe-tracectx/audit", "safe-tracectx/combined", "safe-tracectx/pytest"]
#: The version this safe-tracectx reads and writes of each schema, and what messages call a file of it.
VERSIONS: Final[dict[str, int]] = {AUDIT_SCHEMA: AUDIT_VERSION, COMBINED_SCHEMA: COMBINED_VERSION, PYTEST_SCHEMA: PYTEST_VERSION}
NOUNS: Final[dict[str, str]] = {AUDIT_SCHEMA: "safe-tracectx data file", COMBINED_SCHEMA: "combined file",
                                PYTEST_SCHEMA: "safe-tracectx pytest report"}
#: What reads a document of each schema from Python (named when a report is given a document of another schema).
READERS: Final[dict[str, str]] = {
    AUDIT_SCHEMA: "safe_tracectx.report.text.render_text", COMBINED_SCHEMA: "safe_tracectx.report.ranks.render_combined",
    PYTEST_SCHEMA: "safe_tracectx.report.pytest_document.render_pytest",
}
#: The path that means standard input (as ``lint -`` reads it).
STDIN: Final = "-"
#: The pass label of proxies made outside every audited pass.
OUTSIDE_PASSES: Final = "(outside remat passes)"

Document = AuditDocument | CombinedDocument | PytestDocument
#: The keys an audit document's report reads, and their types.
_AUDIT_BODY: Final[dict[str, type]] = {
    "counts": dict, "dropped": int, "passes": dict, "proxies_by_pass": dict, "call_sites": list, "leaked_sets": list,
    "violations": list,
}


class DataFileError(ValueError):
    """A file that is not a safe-tracectx document, one of another version, or one that cannot be read."""


#: What a report runs into in a document damaged deeper than :func:`validate` checks (an entry of a list that is
#: not a dict, a key missing in one, a number too large for a float): :func:`damaged` makes it the
#: ``DataFileError`` that names the document.
RENDER_ERRORS: Final = (KeyError, TypeError, ValueError, AttributeError, IndexError, ArithmeticError)


def damaged(document: Mapping[str, object], source: str, error: BaseException) -> DataFileError:
    """The error for a valid-looking ``document`` (named ``source``) that its report could not read."""
    noun = NOUNS.get(str(document.get("schema")), "safe-tracectx document")
    return DataFileError(f"{source} is a damaged {noun}: cannot render it ({type(error).__name__}: {error})")


_D = TypeVar("_D", bound=Mapping[str, object])


def rendered(document: _D, source: str, render: Callable[[_D], str]) -> str:
    """``render(document)``, a :func:`damaged` error if the document is damaged deeper than :func:`validate` checks."""
    try:
        return render(document)
    except RENDER_ERRORS as error:
        raise damaged(document, source, error) from error


def version_problem(document: Mapping[str, Any]) -> str | None:
    """Why this safe-tracectx cannot read a document of a known schema at its version (None: it can)."""
    schema = str(document.get("schema"))
    known = VERSIONS[schema]
    version = document.get("version")
    if not isinstance(version, int) or isinstance(version, bool):
        return f"is a damaged {NOUNS[schema]}: version {version!r}, this safe-tracectx reads version {known}"
    if version > known:
        return (f"was written by a newer safe-tracectx ({schema} version {version}; this one reads version {known}): "
                "upgrade safe-tracectx to read it")
    if version < known:
        return (f"was written by an older safe-tracectx ({schema} version {version}; this one reads version {known}): "
                "write it again with this safe-tracectx, or read it with the one that wrote it")
    return None


def _body_problem(document: Mapping[str, Any]) -> str | None:
    """What is wrong with the body of a document of a known schema and version (None: its reports can read it)."""
    if document["schema"] == AUDIT_SCHEMA:
        for key, kind in _AUDIT_BODY.items():
            if not isinstance(document.get(key), kind):
                return f"{key!r} is missing or not a {kind.__name__}"
        if not all(isinstance(value, int) for value in document["counts"].values()):
            return "'counts' holds something other than integers"
        return _runs_problem(document)
    elif document["schema"] == COMBINED_SCHEMA:
        found = document.get("members")
        if not isinstance(found, list) or not all(
            isinstance(m, dict) and isinstance(m.get("audit"), dict) and isinstance(m.get("name"), str)
            and isinstance(m.get("source"), str)
            for m in found
        ):
            return "'members' must list {name, source, audit} entries"
        for member in found:
            if (problem := _member_problem(member["audit"])) is not None:
                return f"its member {member['name']!r} {problem}"
    else:
        tests = document.get("tests")
        if not isinstance(tests, dict) or not all(isinstance(test, dict) for test in tests.values()):
            return "'tests' must map node ids to summaries"
    return None


def _runs_problem(audit: Mapping[str, Any]) -> str | None:
    """What is wrong with an audit's pass runs as combine and the reports read them (None: fine): each a dict, its
    fingerprints a list per output trace of rows (lists), each row's names, shapes and dtypes lists."""
    for key in ("pass_runs", "jit_traces"):
        if (runs := audit.get(key)) is None:
            continue
        if not isinstance(runs, list) or not all(isinstance(run, dict) for run in runs):
            return f"{key!r} must list pass runs"
        for run in runs:
            if (prints := run.get("fingerprints")) is not None and not (isinstance(prints, list) and all(
                    isinstance(trace, list) and all(_is_row(row) for row in trace) for trace in prints)):
                return f"{key!r}: the fingerprints of pass run {str(run.get('label'))!r:.60} must be lists of rows"
    return None


def _is_row(row: object) -> bool:  # [symbol, names, shapes, dtypes]
    return isinstance(row, list) and len(row) == 4 and all(isinstance(part, list) for part in row[1:])


def _member_problem(audit: Mapping[str, Any]) -> str | None:
    """What is wrong with a combined document's member audit (None: fine). A member made from a pytest report's
    test lacks the call sites and pass runs of a run's audit: the keys it has are checked, not the ones it lacks."""
    if audit.get("schema") != AUDIT_SCHEMA:
        return f"is not a {NOUNS[AUDIT_SCHEMA]} (its schema is {audit.get('schema')!r:.40})"
    for key, kind in _AUDIT_BODY.items():
        if key in audit and not isinstance(audit[key], kind):
            return f"is damaged: {key!r} is not a {kind.__name__}"
    if not all(isinstance(value, int) for value in audit.get("counts", {}).values()):
        return "is damaged: 'counts' holds something other than integers"
    problem = _runs_problem(audit)
    return None if problem is None else f"is damaged: {problem}"


@overload
def validate(document: object, source: str, schemas: tuple[Literal["safe-tracectx/audit"]]) -> AuditDocument: ...
@overload
def validate(document: object, source: str, schemas: tuple[Literal["safe-tracectx/combined"]]) -> CombinedDocument: ...
@overload
def validate(document: object, source: str, schemas: tuple[Literal["safe-tracectx/pytest"]]) -> PytestDocument: ...
@overload
def validate(
    document: object, source: str, schemas: tuple[Literal["safe-tracectx/audit"], Literal["safe-tracectx/combined"]]
) -> AuditDocument | CombinedDocument: ...
@overload
def validate(document: object, source: str, schemas: tuple[Schema, ...] = ...) -> Document: ...
def validate(document: object, source: str, schemas: tuple[Schema, ...] = (AUDIT_SCHEMA, COMBINED_SCHEMA, PYTEST_SCHEMA)) -> Document:
    """``document`` as the typed document it is, checked: one of ``schemas`` at the version this safe-tracectx reads,
    with the keys its reports read. ``source`` (a path, or what was given the document) names it in the
    :class:`DataFileError` that says what is wrong and what to do."""
    if not isinstance(document, dict) or not isinstance(document.get("schema"), str) or document["schema"] not in VERSIONS:
        raise DataFileError(
            f"{source} is not a safe-tracectx data file (AuditLog.to_dict() makes one, run --json FILE or --data-file "
            "FILE writes one, pytest --safe-tracectx-report FILE the plugin's)"
        )
    problem = version_problem(document)
    if problem is not None:
        raise DataFileError(f"{source} {problem}")
    schema = document["schema"]
    if schema not in schemas:
        wanted = " or ".join(NOUNS[s] for s in schemas)
        raise DataFileError(f"{source} is a {NOUNS[schema]}, not a {wanted}: give it to {READERS[schema]}")
    for name, audit in _member_audits(document):  # a newer member in a combined file of this version: upgrade too
        if audit.get("schema") == AUDIT_SCHEMA and (problem := version_problem(audit)) is not None:
            raise DataFileError(f"{source} holds a member ({name}) that {problem}")
    problem = _body_problem(document)
    if problem is not None:
        raise DataFileError(f"{source} is a damaged {NOUNS[schema]}: {problem}")
    return cast(Document, document)


def _member_audits(document: Mapping[str, Any]) -> list[tuple[str, Mapping[str, Any]]]:
    """A combined document's members that look like members: (name, audit)."""
    members = document.get("members") if document["schema"] == COMBINED_SCHEMA else None
    if not isinstance(members, list):
        return []
    return [(str(m.get("name")), m["audit"]) for m in members if isinstance(m, dict) and isinstance(m.get("audit"), dict)]


def read_document(path: str | Path) -> Document:
    """The document in ``path`` (``-``: standard input), of a known schema at the version this safe-tracectx reads."""
    if str(path) == STDIN and sys.stdin is None:
        raise DataFileError("cannot read -: standard input is closed")
    try:
        text = sys.stdin.read() if str(path) == STDIN else Path(path).read_text(encoding="utf-8")
        document = json.loads(text)
    except (OSError, UnicodeError, ValueError) as error:
        raise DataFileError(f"cannot read {path}: {error}") from error
    except RecursionError:  # json's decoder recurses per nesting level; no document safe-tracectx writes is this deep
        raise DataFileError(f"cannot read {path}: its JSON is nested too deeply to be a safe-tracectx document") from None
    return validate(document, str(path))


def write_document(document: Document, path: str | Path, *, compact: bool = False) -> None:
    """The document as JSON at ``path``: indented, or ``compact`` (data files: a third smaller, faster to combine)."""
    text = json.dumps(document, default=str, **({"separators": (",", ":")} if compact else {"indent": 2}))
    Path(path).write_text(text + "\n", encoding="utf-8")


def per_test_audits(document: PytestDocument, path: str | Path) -> list[AuditDocument]:
    """A pytest report's tests, in its order, each as an audit document: its summary's keys and ``test`` (the node id).

    A test's summary has what the plugin keeps (counts, passes, violations, sets never reset, traceless
    proxies), not the call sites or pass runs of a run's audit.
    """
    problem = _body_problem(document)
    if problem is not None:
        raise DataFileError(f"{path} is a damaged {NOUNS[PYTEST_SCHEMA]}: {problem}")
    return [cast(AuditDocument, {"schema": AUDIT_SCHEMA, "version": AUDIT_VERSION, "test": str(nodeid), **test})
            for nodeid, test in document["tests"].items()]


def pass_runs(document: AuditDocument) -> list[PassRun]:
    """The audit's ``pass_runs``; else the ``jit_traces`` that ``run`` derives from Thunder's kept traces."""
    runs = document.get("pass_runs") or document.get("jit_traces") or []
    return [run for run in runs if isinstance(run, dict)]


def pass_run_document(run: Mapping[str, Any]) -> dict[str, Any]:
    """A recorded pass run (or its ``pass_run`` event's detail) as documents hold it: each fingerprint a list of
    rows, unpacked from the JSON text a pass run keeps (``traces.fingerprint.packed_fingerprint``)::

        >>> pass_run_document({"label": "a", "fingerprints": ['[["sin",["t0"],[[2]],["float32"]]]'], "input_fingerprints": {}})
        {'label': 'a', 'fingerprints': [[['sin', ['t0'], [[2]], ['float32']]]], 'input_fingerprints': {}}
    """
    document = dict(run)
    if isinstance(prints := run.get("fingerprints"), list):
        document["fingerprints"] = [_unpacked(p) for p in prints]
    if isinstance(given := run.get("input_fingerprints"), dict):
        document["input_fingerprints"] = {number: _unpacked(p) for number, p in given.items()}
    return document


def _unpacked(fingerprint: object) -> Any:
    # A run recorded by hand (an event emitted with rows) is kept as it came.
    return json.loads(fingerprint) if isinstance(fingerprint, str) else fingerprint


def keyed_runs(runs: Iterable[PassRun]) -> list[tuple[RunKey, PassRun]]:
    """Each run with its key: (label, how many runs with that label came before it), as ranks are compared."""
    seen: dict[str, int] = {}
    keyed: list[tuple[RunKey, PassRun]] = []
    for run in runs:
        label = str(run.get("label"))
        keyed.append(((label, seen.get(label, 0)), run))
        seen[label] = seen.get(label, 0) + 1
    return keyed


def rank_of(document: AuditDocument) -> Rank | None:
    """The ``rank`` object of a rank's data file (None: not written under a launch)."""
    rank = document.get("rank")
    return rank if isinstance(rank, dict) else None


def rank_number(document: AuditDocument) -> int | None:
    """The global rank that wrote the document (None: none did)."""
    rank = rank_of(document)
    number = None if rank is None else rank.get("rank")
    return number if isinstance(number, int) else None


def site_text(site: Site | None) -> str:
    """``path:line in function`` of a document's site."""
    return "(unknown)" if not site else f"{site.get('file')}:{site.get('line')} in {site.get('function')}"


def member_document(document: AuditDocument, source: str) -> Member:
    """A combined document's member: the audit document and where it came from (named by its rank, or test, if any)."""
    number = rank_number(document)
    name = f"rank {number}" if number is not None else str(document.get("test") or Path(source).name)
    return {"name": name, "source": source, "audit": document}


def site_document(site: CallSite | None) -> Site | None:
    """A call site as documents hold it: its file (relative where it can be), line and function."""
    return None if site is None else {"file": display_path(site.filename), "line": site.lineno, "function": site.function}


def relative_paths(text: str) -> str:
    """A message with paths under the current folder made relative to it (as every report shows paths)."""
    try:
        here = os.getcwd() + os.sep
    except OSError:
        return text
    return text.replace(here, "")
