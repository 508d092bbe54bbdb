"""The saved documents: each schema's name and version, the one reader of a saved file, and what every report reads.

Three schemas (docs/audit-schema.md, docs/multi-rank.md): a run's audit, a combined
file, and the pytest plugin's per-test report. ``read_document`` reads any of them
from a file or from standard input (``-``) and applies the version rules::

    >>> from safe_tracectx.auditlog.documents import version_problem
    >>> version_problem({"schema": "safe-tracectx/audit", "version": 3})  # doctest: +ELLIPSIS
    'was written by a newer safe-tracectx (safe-tracectx/audit version 3; this one reads version 2): upgrade ...'
    >>> version_problem({"schema": "safe-tracectx/audit", "version": 2}) is None
    True
"""

from __future__ import annotations

import json
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Final

__all__ = [
    "AUDIT_SCHEMA",
    "AUDIT_VERSION",
    "COMBINED_SCHEMA",
    "COMBINED_VERSION",
    "PYTEST_SCHEMA",
    "PYTEST_VERSION",
    "STDIN",
    "DataFileError",
    "pass_runs",
    "read_document",
    "per_test_audits",
    "version_problem",
]

AUDIT_SCHEMA: Final = "safe-tracectx/audit"
AUDIT_VERSION: Final = 2
COMBINED_SCHEMA: Final = "safe-tracectx/combined"
COMBINED_VERSION: Final = 1
PYTEST_SCHEMA: Final = "safe-tracectx/pytest"
PYTEST_VERSION: Final = 2
#: The version this safe-tracectx reads and writes of each schema, and what messages call a file of it.
VERSIONS: Final = {AUDIT_SCHEMA: AUDIT_VERSION, COMBINED_SCHEMA: COMBINED_VERSION, PYTEST_SCHEMA: PYTEST_VERSION}
NOUNS: Final = {AUDIT_SCHEMA: "safe-tracectx data file", COMBINED_SCHEMA: "combined file",
                PYTEST_SCHEMA: "safe-tracectx pytest report"}
#: The path that means standard input (as ``lint -`` reads it).
STDIN: Final = "-"


class DataFileError(ValueError):
    """A file that is not a safe-tracectx document, one of another version, or one that cannot be read."""


def version_problem(document: dict[str, Any]) -> str | None:
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


def read_document(path: str | Path) -> dict[str, Any]:
    """The document in ``path`` (``-``: standard input), of a known schema at the version this safe-tracectx reads."""
    if str(path) == STDIN and sys.stdin is None:
        raise DataFileError("cannot read -: standard input is closed")
    try:
        text = sys.stdin.read() if str(path) == STDIN else Path(path).read_text(encoding="utf-8")
        document = json.loads(text)
    except (OSError, UnicodeError, ValueError) as error:
        raise DataFileError(f"cannot read {path}: {error}") from error
    if not isinstance(document, dict) or document.get("schema") not in VERSIONS:
        raise DataFileError(
            f"{path} is not a safe-tracectx data file (run --json FILE or --data-file FILE writes one, "
            "pytest --safe-tracectx-report FILE the plugin's)"
        )
    problem = version_problem(document)
    if problem is not None:
        raise DataFileError(f"{path} {problem}")
    return document


def pass_runs(document: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The audit's ``pass_runs``; else the ``jit_traces`` that ``run`` derives from Thunder's kept traces."""
    runs = document.get("pass_runs") or document.get("jit_traces") or []
    return [run for run in runs if isinstance(run, dict)]


def per_test_audits(document: dict[str, Any], path: str | Path) -> list[dict[str, Any]]:
    """A pytest report's tests, in its order, each as an audit document: its summary's keys and ``test`` (the node id).

    A test's summary has what the plugin keeps (counts, passes, violations, sets never reset, traceless
    proxies), not the call sites or pass runs of a run's audit.
    """
    tests = document.get("tests")
    if not isinstance(tests, dict) or not all(isinstance(test, dict) for test in tests.values()):
        raise DataFileError(f"{path} is a damaged {NOUNS[PYTEST_SCHEMA]}: 'tests' must map node ids to summaries")
    return [{"schema": AUDIT_SCHEMA, "version": AUDIT_VERSION, "test": str(nodeid), **test} for nodeid, test in tests.items()]
