"""The HTML report's model: members, pass keys with each member's run, what each run was given, call sites,
and the violations (each once)."""

from __future__ import annotations

import dataclasses
from typing import Any

from safe_tracectx.auditlog.combine import combine
from safe_tracectx.auditlog.document_types import AuditDocument, CombinedDocument, Divergence, Member, PassRun, RunKey, Site
from safe_tracectx.auditlog.documents import COMBINED_SCHEMA, keyed_runs, member_document, pass_runs
from safe_tracectx.report.html.inputs import Given, inputs_of
from safe_tracectx.report.html.violation_list import Listed, listed

__all__ = ["Given", "Listed", "Report", "build"]

Key = RunKey


@dataclasses.dataclass
class Report:
    """What the pages are made from: the members, each pass key's runs, the call sites and the violations."""

    members: list[Member]
    divergences: list[Divergence]
    world_size: int | None
    #: (label, occurrence) in order of first appearance; the runs of each member under that key (or None).
    keys: list[Key]
    runs: dict[Key, list[PassRun | None]]
    #: id(run) -> its pass key (to link a run's input to the page of the run that returned it).
    key_of: dict[int, Key]
    #: per member: id(run) -> the traces it was given (None: the data file does not record them)
    inputs: list[dict[int, list[Given] | None]]
    #: call sites in order of first use, and per member and proxy name, the index of its creating site
    sites: list[Site]
    creators: list[dict[tuple[str, str], int]]
    violations: list[Listed]

    def page_of(self, key: Key) -> str:
        """The file name of a pass key's page."""
        return f"pass-{self.keys.index(key) + 1:03d}.html"


def _site_index(report_sites: list[Site], known: dict[tuple[Any, ...], int], site: Site) -> int:
    key = (site.get("file"), site.get("line"), site.get("function"))
    if key not in known:
        known[key] = len(report_sites)
        report_sites.append(site)
    return known[key]


def build(document: AuditDocument | CombinedDocument) -> Report:
    """The report model of a (validated) audit or combined document."""
    if document["schema"] == COMBINED_SCHEMA:
        combined = document
    else:
        combined = combine([member_document(document, "this run")])
        combined["members"][0]["name"] = "this run" if "rank" not in document else combined["members"][0]["name"]
    members = combined["members"]
    keys: list[Key] = []
    runs: dict[Key, list[PassRun | None]] = {}
    key_of: dict[int, Key] = {}
    member_runs: list[list[PassRun]] = []
    for position, member in enumerate(members):
        member_runs.append(pass_runs(member["audit"]))
        for key, run in keyed_runs(member_runs[-1]):
            if key not in runs:
                keys.append(key)
                runs[key] = [None] * len(members)
            runs[key][position] = run
            key_of[id(run)] = key
    sites: list[Site] = []
    known: dict[tuple[Any, ...], int] = {}
    creators: list[dict[tuple[str, str], int]] = []
    for member in members:
        made: dict[tuple[str, str], int] = {}
        for event in member["audit"].get("events", []):
            if event.get("kind") == "proxy_created" and (site := event.get("site")) and "name" in event.get("detail", {}):
                index = _site_index(sites, known, site)
                made.setdefault((str(event.get("pass")), str(event["detail"]["name"])), index)
                made.setdefault(("", str(event["detail"]["name"])), index)
        creators.append(made)
    violations = listed(member_runs, [[key_of[id(r)] for r in rs] for rs in member_runs],
                        [m["audit"].get("violations", []) for m in members])
    return Report(members, combined.get("divergences", []), combined.get("world_size"), keys, runs, key_of,
                  [inputs_of(rs) for rs in member_runs], sites, creators, violations)
