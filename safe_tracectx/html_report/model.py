"""The HTML report's model: members, pass keys with each member's run, the run before each, call sites."""

from __future__ import annotations

import dataclasses
from typing import Any

from safe_tracectx.combine import COMBINED_SCHEMA, combine, member_document, pass_runs

__all__ = ["Report", "build"]


@dataclasses.dataclass
class Report:
    """What the pages are made from: the members, each pass key's runs, and the call sites."""

    members: list[dict[str, Any]]
    divergences: list[dict[str, Any]]
    world_size: int | None
    #: (label, occurrence) in order of first appearance; the runs of each member under that key (or None).
    keys: list[tuple[str, int]]
    runs: dict[tuple[str, int], list[dict[str, Any] | None]]
    #: per member: the run before each run in its own order (its input, if any)
    previous: list[dict[int, dict[str, Any]]]
    #: call sites in order of first use, and per member and proxy name, the index of its creating site
    sites: list[dict[str, Any]]
    creators: list[dict[tuple[str, str], int]]

    def page_of(self, key: tuple[str, int]) -> str:
        """The file name of a pass key's page."""
        return f"pass-{self.keys.index(key) + 1:03d}.html"


def _site_index(report_sites: list[dict[str, Any]], known: dict[tuple[Any, ...], int], site: dict[str, Any]) -> int:
    key = (site.get("file"), site.get("line"), site.get("function"))
    if key not in known:
        known[key] = len(report_sites)
        report_sites.append(site)
    return known[key]


def build(document: dict[str, Any]) -> Report:
    """The report model of an audit or combined document."""
    if document.get("schema") == COMBINED_SCHEMA:
        combined = document
    else:
        combined = combine([member_document(document, "this run")])
        combined["members"][0]["name"] = "this run" if "rank" not in document else combined["members"][0]["name"]
    members: list[dict[str, Any]] = combined["members"]
    keys: list[tuple[str, int]] = []
    runs: dict[tuple[str, int], list[dict[str, Any] | None]] = {}
    previous: list[dict[int, dict[str, Any]]] = []
    for position, member in enumerate(members):
        seen: dict[str, int] = {}
        before: dict[int, dict[str, Any]] = {}
        last_of_role: dict[Any, dict[str, Any]] = {}
        for run in pass_runs(member["audit"]):
            label = str(run.get("label"))
            key = (label, seen.get(label, 0))
            seen[label] = key[1] + 1
            if key not in runs:
                keys.append(key)
                runs[key] = [None] * len(members)
            runs[key][position] = run
            if run.get("role") in last_of_role:
                before[id(run)] = last_of_role[run.get("role")]
            last_of_role[run.get("role")] = run
        previous.append(before)
    sites: list[dict[str, Any]] = []
    known: dict[tuple[Any, ...], int] = {}
    creators: list[dict[tuple[str, str], int]] = []
    for member in members:
        made: dict[tuple[str, str], int] = {}
        for event in member["audit"].get("events", []):
            if event.get("kind") == "proxy_created" and event.get("site") and "name" in event.get("detail", {}):
                index = _site_index(sites, known, event["site"])
                made.setdefault((str(event.get("pass")), str(event["detail"]["name"])), index)
                made.setdefault(("", str(event["detail"]["name"])), index)
        creators.append(made)
    return Report(members, combined.get("divergences", []), combined.get("world_size"), keys, runs, previous, sites, creators)
