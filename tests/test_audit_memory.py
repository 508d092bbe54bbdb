"""What an audit keeps of each pass run costs the garbage collector a few containers, not a few per bound symbol.

A compile's pass runs record tens of thousands of fingerprint rows; kept as lists, each row is four or more
containers the collector walks at every full collection of the compile (the audit's main cost). The log keeps
each trace's fingerprint as one string; its documents still hold the rows as lists.
"""

from __future__ import annotations

import array
import collections
import gc
import json
import warnings
from typing import Any

import torch

import safe_tracectx as stc
from safe_tracectx._support.events import Event

with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    import thunder

#: What the log is made of (followed while counting what it keeps); anything else is someone else's.
_CONTAINERS = (list, tuple, dict, set, frozenset, collections.Counter, array.array, Event)


def _chain(x: torch.Tensor) -> torch.Tensor:
    for _ in range(40):
        x = torch.sin(x) * 1.5 + 0.25
    return x


def _kept_containers(root: object) -> int:
    """The GC-tracked containers reachable from ``root`` through the log's own containers."""
    seen: set[int] = set()
    stack = [root]
    while stack:
        obj = stack.pop()
        if id(obj) in seen:
            continue
        seen.add(id(obj))
        stack.extend(r for r in gc.get_referents(obj) if isinstance(r, _CONTAINERS) and gc.is_tracked(r))
    return len(seen)


def test_the_audit_keeps_fingerprints_as_strings_and_documents_hold_their_rows() -> None:
    with stc.audit() as log:
        jitted = thunder.jit(_chain)
        jitted(torch.randn(3, 3))
    runs = log.pass_runs
    rows = sum(len(trace) for run in runs for trace in (*run["fingerprints"], *(run["input_fingerprints"] or {}).values()))
    assert len(runs) >= 5 and rows >= 40 * len(runs)  # dozens of rows per run: lists would be thousands of containers
    kept = _kept_containers(vars(log))
    assert kept < rows / 2, f"the audit keeps {kept} containers for {rows} fingerprint rows: rows kept as lists again?"
    # The documents are as before: each row a list of lists, equal to the JSON read back.
    document = log.to_dict()
    rows_kept = [row for run in document["pass_runs"] for t in run["fingerprints"] for row in t]
    assert all(type(row) is list and all(type(part) is list for part in row[1:]) for row in rows_kept)
    assert any(
        row[0] == "sin" and row[2] == [[3, 3]] and row[3] == ["thunder.dtypes.float32"] for row in rows_kept)
    assert json.loads(log.to_json())["pass_runs"] == document["pass_runs"]
    events: list[Any] = [e["detail"] for e in document["events"] if e["kind"] == "pass_run"]
    assert [e["fingerprints"] for e in events] == [run["fingerprints"] for run in document["pass_runs"]]
