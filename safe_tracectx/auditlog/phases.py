"""The work of an audit by phase: tracing, each Transform, autodiff, the split, each executor's fusion pass, remat.

    >>> from safe_tracectx.auditlog.phases import phases
    >>> phases([], {"ThunderFX splitter (support checks)": 3})[0]["proxies"]
    3
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, Final

from safe_tracectx._support.pass_catalog import KINDS, PASSES

__all__ = ["phases"]

#: Sub-phases (proxies reported under a label of their own inside a pass, by the function that made them or
#: by a function hooked as a phase) -> the kind of their pass.
_SUB_PHASES: Final = {
    **{label: spec.kind for spec in PASSES for _, label in spec.phases},
    **{spec.label: spec.kind for spec in PASSES if spec.hook == "phase"},
}
#: Sub-phases whose work is all on one side of the pair.
_SUB_PHASE_ROLES: Final = {"backward recompute": "backward"}


def phases(pass_runs: Iterable[Mapping[str, Any]], proxies_by_pass: Mapping[str, int]) -> list[dict[str, Any]]:
    """The work by phase, one entry per pass label or sub-phase, in the order of the pass catalogue's kinds
    (:data:`~safe_tracectx._support.pass_catalog.KINDS`), the rest last: ``label``, ``kind``, ``runs``,
    ``seconds``, ``proxies`` (made while it was the innermost pass), ``by_role`` (its runs' proxies per role:
    ``forward``, ``backward``, ``none``)."""
    table: dict[str, dict[str, Any]] = {}
    for run in pass_runs:
        entry = table.setdefault(
            run["label"],
            {"label": run["label"], "kind": run["kind"], "runs": 0, "seconds": 0.0, "proxies": 0,
             "by_role": {"forward": 0, "backward": 0, "none": 0}},
        )
        entry["runs"] += 1
        entry["seconds"] += run["seconds"] or 0.0
        entry["by_role"][run["role"] or "none"] += run["proxies"] or 0
    for label, count in proxies_by_pass.items():
        entry = table.setdefault(
            label, {"label": label, "kind": _SUB_PHASES.get(label, "other"), "runs": 0, "seconds": 0.0,
                    "proxies": 0, "by_role": {"forward": 0, "backward": 0, "none": 0}},
        )
        entry["proxies"] = count
        if label in _SUB_PHASE_ROLES:
            entry["by_role"][_SUB_PHASE_ROLES[label]] = count
    order = {kind: index for index, kind in enumerate(KINDS)}
    return sorted(table.values(), key=lambda e: (order.get(e["kind"], len(order)), e["label"]))

