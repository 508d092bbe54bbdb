"""Combine data files (one per rank, or several runs) into one document, and find where ranks diverge.

Schema ``safe-tracectx/combined`` version 1 (docs/multi-rank.md). Each member is a
data file's audit document with where it came from; ``divergences`` lists, per
pass label and occurrence, the first bound symbol where the members' output
traces differ (``carried``: an earlier pass diverged already, so this one may only
carry that difference on)::

    >>> from safe_tracectx.auditlog.combine import combine, member_document
    >>> def doc(rank, symbols):
    ...     run = {"label": "fusion", "fingerprints": [[[s, ["t0"], [None], [None]] for s in symbols]]}
    ...     return {"schema": "safe-tracectx/audit", "version": 2, "rank": {"rank": rank}, "pass_runs": [run]}
    >>> same = combine([member_document(doc(0, ["add"]), "a"), member_document(doc(1, ["add"]), "b")])
    >>> same["divergences"]
    []
    >>> differ = combine([member_document(doc(0, ["add"]), "a"), member_document(doc(1, ["add", "mul"]), "b")])
    >>> d = differ["divergences"][0]
    >>> d["pass"], d["index"], d["had"]["rank 1"][0], d["differs"]
    ('fusion', 1, 'mul', ['missing'])
"""

from __future__ import annotations

import contextlib
import gc
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any, Final

from safe_tracectx.auditlog.document_types import AuditDocument, CombinedDocument, Divergence, FingerprintRow, Member, PassRun, RunKey
from safe_tracectx.auditlog.documents import (
    COMBINED_SCHEMA,
    COMBINED_VERSION,
    PYTEST_SCHEMA,
    DataFileError,
    Document,
    keyed_runs,
    member_document,
    pass_runs,
    per_test_audits,
    rank_number,
    rank_of,
    read_document,
)

__all__ = [
    "COMBINED_SCHEMA",
    "COMBINED_VERSION",
    "DataFileError",
    "carried_runs",
    "combine",
    "find_divergences",
    "load_members",
    "member_document",
    "members_of",
    "pass_runs",
    "paused_gc",
]

@contextlib.contextmanager
def paused_gc(*, freeze: bool = False) -> Iterator[None]:
    """The cyclic collector paused: reading many large files makes millions of lists it would scan again and again.

    ``freeze`` (for a command about to exit): move everything to the permanent
    generation before resuming, so the collector never scans that JSON data at all.
    """
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            if freeze:
                gc.freeze()
            gc.enable()


def load_members(paths: Iterable[str | Path], *, all_events: bool = True) -> list[Member]:
    """The members of every file (``-``: standard input): an audit document is one, a combined document brings
    its own, a pytest report one per test.

    Without ``all_events``, the raw event stream is dropped as each file is read
    from every member but rank 0 (or, with no ranks, the first file): counts,
    passes, pass runs, call sites and violations stay; memory stays about one data file's events.
    """
    members: list[Member] = []
    with paused_gc():
        for path in paths:
            _load_one(Path(path), members, all_events)
    return members


def members_of(document: Document, source: str) -> list[Member]:
    """The members a (validated) document brings: itself (an audit), its own (a combined one), one per test (a
    pytest report)."""
    if document["schema"] == COMBINED_SCHEMA:
        return document["members"]
    if document["schema"] == PYTEST_SCHEMA:
        return [member_document(audit, source) for audit in per_test_audits(document, source)]
    return [member_document(document, source)]


def _load_one(path: Path, members: list[Member], all_events: bool) -> None:
    for member in members_of(read_document(path), str(path)):
        number = rank_number(member["audit"])
        if not all_events and (number > 0 if number is not None else bool(members)):
            member["audit"]["events"] = []
        members.append(member)


def _unique_names(members: list[Member]) -> None:
    seen: dict[str, int] = {}
    for member in members:
        seen[member["name"]] = seen.get(member["name"], 0) + 1
    for name in [n for n, count in seen.items() if count > 1]:
        for number, member in enumerate([m for m in members if m["name"] == name], start=1):
            member["name"] = f"{name} (run {number}, {Path(member['source']).name})"


def _sort_key(member: Member) -> tuple[int, str]:
    number = rank_number(member["audit"])
    return (number if number is not None else 1 << 30, member["source"])


def _first_difference(prints: Sequence[list[list[Any]]]) -> int | None:
    """The first bound-symbol index where the fingerprints differ (None: all equal)."""
    if all(p == prints[0] for p in prints[1:]):  # the usual case, compared in C
        return None
    longest = max(len(p) for p in prints)
    for index in range(longest):
        rows = [p[index] if index < len(p) else None for p in prints]
        if any(row != rows[0] for row in rows[1:]):
            return index
    return None


def _divergence(key: RunKey, carried: bool, trace: int | None, index: int | None, had: dict[str, FingerprintRow | None],
                differs: list[str] | None, message: str, fix: str) -> Divergence:
    """One divergence (``differs`` None: a pass that did not run on every member)."""
    found: Divergence = {
        "error": "RankDivergence", "check": "rank_divergence", "action": "report", "pass": key[0], "occurrence": key[1],
        "site": None, "thread": None, "carried": carried, "trace": trace, "index": index, "had": had,
        "differs": differs or [], "message": message, "fix": fix,
    }
    if differs is None:
        del found["differs"]
    return found


def find_divergences(members: list[Member]) -> list[Divergence]:
    """Violations where members ran a pass a different number of times, or built different output traces."""
    if len(members) < 2:
        return []
    keyed = [dict(keyed_runs(pass_runs(m["audit"]))) for m in members]
    names = [m["name"] for m in members]
    order: dict[RunKey, None] = {}
    for runs in keyed:
        order.update(dict.fromkeys(runs))
    found: list[Divergence] = []
    diverged = False
    for label, occurrence in order:
        runs_here = [runs.get((label, occurrence)) for runs in keyed]
        carried = diverged  # by an earlier pass run, not by another output trace of this one
        if any(run is None for run in runs_here):
            missing = [name for name, run in zip(names, runs_here) if run is None]
            found.append(_divergence(
                (label, occurrence), carried, None, None, {name: None for name in missing}, None,
                f"pass {label!r} (run {occurrence + 1}) ran on some ranks but not on {', '.join(missing)}",
                "a pass that runs on one rank only: look for rank-dependent configuration or branches"))
            diverged = True
            continue
        prints = [run.get("fingerprints") or [] for run in runs_here if run is not None]
        for trace_index in range(max(len(p) for p in prints)):
            traces = [p[trace_index] if trace_index < len(p) else [] for p in prints]
            index = _first_difference(traces)
            if index is None:
                continue
            had = {name: (t[index] if index < len(t) else None) for name, t in zip(names, traces)}
            described = "; ".join(f"{name}: {_describe(row)}" for name, row in had.items())
            differs = _differs(list(had.values()))
            found.append(_divergence(
                (label, occurrence), carried, trace_index, index, had, differs,
                f"ranks diverge in pass {label!r} (run {occurrence + 1}), output trace "
                f"{trace_index}, at bound symbol {index} ({', '.join(differs)}): {described}",
                "the ranks built different traces: look for a branch on the rank, or on data or "
                "shapes that differ by rank, before this symbol"))
            diverged = True
    return found


def carried_runs(divergences: list[Divergence]) -> list[str]:
    """The pass runs that only carry on an earlier divergence, each once: ``label (run N)`` (a run can differ in
    several of its output traces)."""
    return list(dict.fromkeys(f"{d['pass']} (run {d['occurrence'] + 1})" for d in divergences if d.get("carried")))


_PARTS: Final = ("symbol", "names", "shapes", "dtypes")


def _differs(rows: list[list[Any] | None]) -> list[str]:
    """Which parts of the rows differ: ``symbol``, ``names``, ``shapes``, ``dtypes`` (``missing``: a trace ended)."""
    if any(row is None for row in rows):
        return ["missing"]
    padded = [(list(row) + [None] * 4)[:4] for row in rows if row is not None]
    return [part for i, part in enumerate(_PARTS) if any(row[i] != padded[0][i] for row in padded[1:])]


def _describe(row: list[Any] | None) -> str:
    if row is None:
        return "(no bound symbol)"
    name, outs, shapes, dtypes = (list(row) + [[], [], []])[:4]
    parts = [f"{o}{'' if s is None else list(s)}{'' if d is None else ' ' + str(d)}" for o, s, d in zip(outs, shapes, dtypes)]
    return f"{name} -> {', '.join(parts) or '()'}"


def combine(members: list[Member], *, all_events: bool = True) -> CombinedDocument:
    """The combined document: members sorted by rank, then source; and the divergences among them.

    Without ``all_events`` only the first member keeps its ``events`` (the HTML
    report links the first member's new proxies to their call sites from them).
    Ranks of different launches are a :class:`~safe_tracectx.auditlog.launches.MixedLaunchError` naming their files.
    """
    from safe_tracectx.auditlog.launches import FIX, MixedLaunchError, launch_problem

    if (problem := launch_problem(members)) is not None:
        raise MixedLaunchError(f"{problem}; {FIX}")
    members = sorted(members, key=_sort_key)
    if not all_events:
        for member in members[1:]:
            member["audit"]["events"] = []
    _unique_names(members)
    world_sizes = {rank.get("world_size") for m in members if (rank := rank_of(m["audit"])) is not None}
    return {
        "schema": COMBINED_SCHEMA,
        "version": COMBINED_VERSION,
        "world_size": world_sizes.pop() if len(world_sizes) == 1 else None,
        "events": "all" if all_events else "first member",
        "members": members,
        "divergences": find_divergences(members),
    }
