"""Which members of a combine are of one launch: data files of different launches are named, never merged.

A rank's data file records its world size and its launch (``ranks.Launch``: torchrun's
run id, the master's address and port, the restart count, when the node's agent
started). Members whose world sizes, or any launch field every member records,
disagree are of different launches; so are members of one host whose agents
started at different times (stale files of an earlier job in the same folder)::

    >>> from safe_tracectx.auditlog.launches import launch_problem
    >>> def member(rank, world, source):
    ...     return {"source": source, "audit": {"rank": {"rank": rank, "world_size": world, "host": "h"}}}
    >>> print(launch_problem([member(0, 2, "a.json"), member(1, 2, "b.json"), member(2, 4, "old.json")]))
    the data files are of 2 launches (their world size differs): world size 2: a.json, b.json; world size 4: old.json
    >>> launch_problem([member(0, 2, "a.json"), member(1, 2, "b.json")]) is None
    True
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any, Final

from safe_tracectx.auditlog.document_types import Member
from safe_tracectx.auditlog.documents import DataFileError, rank_of

__all__ = ["FIX", "MixedLaunchError", "launch_problem"]

#: What a launch is told by: the rank object's ``world_size``, then its ``launch`` object's fields.
_FIELDS: Final = (("world_size", "world size"), ("run_id", "run id"), ("master", "master"), ("restart", "restart"))
FIX: Final = ("remove the data files of the other launch (a stale rank of an earlier, bigger job is one), or "
              "combine only the files of one launch: safe-tracectx combine FILE ...")


class MixedLaunchError(DataFileError):
    """Data files of different launches given to one combine."""


def _identity(member: Member) -> dict[str, Any]:
    rank = rank_of(member["audit"])
    assert rank is not None  # only ranked members are told apart
    given = rank.get("launch")
    launch: Mapping[str, Any] = given if isinstance(given, dict) else {}
    identity = {"world_size": rank.get("world_size"), **{key: launch.get(key) for key, _ in _FIELDS[1:]}}
    return identity | {"host": rank.get("host"), "started": launch.get("started")}


def _started(seconds: Any) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(seconds)) if isinstance(seconds, (int, float)) else "?"


def _groups(members: list[Member], keys: list[str]) -> dict[tuple[Any, ...], list[Member]]:
    groups: dict[tuple[Any, ...], list[Member]] = {}
    for member in members:
        groups.setdefault(tuple(_identity(member)[key] for key in keys), []).append(member)
    return groups


def _describe(groups: dict[tuple[Any, ...], list[Member]], keys: list[str], why: str) -> str:
    names = dict(_FIELDS) | {"host": "host", "started": "launcher started"}
    parts = []
    for values, group in groups.items():
        told = ", ".join(f"{names[key]} {_started(value) if key == 'started' else value}" for key, value in zip(keys, values))
        parts.append(f"{told}: {', '.join(m['source'] for m in group)}")
    return f"the data files are of {len(groups)} launches ({why}): " + "; ".join(parts)


def launch_problem(members: list[Member]) -> str | None:
    """Which members are of which launch, when they are of several (None: one launch, or no ranks to tell)."""
    ranked = [m for m in members if rank_of(m["audit"]) is not None]
    identities = [_identity(m) for m in ranked]
    known = [key for key, _ in _FIELDS if identities and all(i[key] is not None for i in identities)]
    groups = _groups(ranked, known)
    if len(groups) > 1:
        differ = [dict(_FIELDS)[k] for i, k in enumerate(known) if len({values[i] for values in groups}) > 1]
        listed = ", ".join(differ[:-1]) + f" and {differ[-1]} differ" if len(differ) > 1 else f"{differ[0]} differs"
        return _describe(groups, known, f"their {listed}")
    for host in dict.fromkeys(i["host"] for i in identities):
        here = [m for m, i in zip(ranked, identities) if i["host"] == host]
        if all(_identity(m)["started"] is not None for m in here) and len(_groups(here, ["started"])) > 1:
            return _describe(_groups(here, ["host", "started"]), ["host", "started"],
                             "the torchrun agents that started them on one host differ")
    return None
