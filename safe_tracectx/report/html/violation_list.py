"""Each violation once, with the pass run it belongs to.

A violation is in a data file twice: as the audit's ``violations`` entry
(error, action, site, fix) and as a string in its pass run's ``violations``
(``kind: message (where)``). The entry takes the run whose string its message
contains; a run's string no entry took is listed on its own, and an entry seen
again (the same pass, error, message and site) is counted, not repeated::

    >>> run = {"label": "p", "violations": ["defined-twice: t0 is defined twice (bound symbol 2)"]}
    >>> entry = {"pass": "p", "error": "NameClashError", "message": "p produced trace where t0 is defined twice "
    ...          "(bound symbol 2)", "site": None}
    >>> [(v.key, v.error, v.count) for v in listed([[run]], [[("p", 0)]], [[entry, entry]])]
    [(('p', 0), 'NameClashError', 2)]
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

from safe_tracectx.auditlog.document_types import PassRun, RunKey, Site, Violation

__all__ = ["Listed", "listed"]

Key = RunKey


@dataclasses.dataclass
class Listed:
    """One violation as the report lists it: where it is on which pass page (``key``, ``anchor``), and how often."""

    member: int
    message: str
    key: Key | None
    anchor: str
    error: str | None = None
    action: str | None = None
    fix: str | None = None
    site: Site | None = None
    #: The proxy names it is about (the audit's ``names``): the rows a pass page highlights.
    names: list[str] = dataclasses.field(default_factory=list)
    #: True when the pass ran more than once and the data file does not say in which run it was found.
    run_unknown: bool = False
    count: int = 1


def _said(text: str) -> str:
    """The message part of a run's ``kind: message (where)``."""
    kind, _, rest = text.partition(": ")
    return rest if rest and " " not in kind else text


def listed(runs: list[list[PassRun]], keys: list[list[Key]], entries: list[list[Violation]]) -> list[Listed]:
    """The violations of each member (its runs, their pass keys, its audit's ``violations``), each once."""
    found: list[Listed] = []
    for member, (member_runs, member_keys, member_entries) in enumerate(zip(runs, keys, entries, strict=True)):
        unclaimed = [(key, text) for run, key in zip(member_runs, member_keys) for text in run.get("violations") or []]
        seen: dict[tuple[Any, ...], Listed] = {}
        for entry in member_entries:
            site: Mapping[str, Any] = entry.get("site") or {}
            same = (entry.get("pass"), entry.get("error"), entry.get("message"), site.get("file"), site.get("line"))
            if same in seen:
                seen[same].count += 1
                continue
            message = str(entry.get("message"))
            taken = next((i for i, (key, text) in enumerate(unclaimed)
                          if key[0] == entry.get("pass") and _said(str(text)) in message), None)
            run_unknown = False
            if taken is not None:
                key: Key | None = unclaimed.pop(taken)[0]
            else:
                of_pass = [k for k in member_keys if k[0] == entry.get("pass")]
                key = of_pass[0] if of_pass else None
                run_unknown = len(set(of_pass)) > 1
            listing = Listed(member, message, key, f"violation-{len(found) + 1}", error=entry.get("error"),
                             action=entry.get("action"), fix=entry.get("fix"), site=entry.get("site"),
                             names=[str(n) for n in entry.get("names") or []], run_unknown=run_unknown)
            seen[same] = listing
            found.append(listing)
        for key, text in dict.fromkeys(unclaimed):
            found.append(Listed(member, str(text), key, f"violation-{len(found) + 1}"))
    return found
