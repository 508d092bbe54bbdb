"""The audit log: what happened to trace contexts and proxies while Thunder ran.

An ``AuditLog`` receives the event stream while it runs (a context manager,
like coverage's ``Coverage.collect()``); ``safe_tracectx.audit()`` installs the
hooks for a block and yields one::

    >>> from safe_tracectx._support import events
    >>> from safe_tracectx.auditlog.log import AuditLog
    >>> with AuditLog() as log:
    ...     events.emit("trace_set", trace=None, block=1)
    >>> log.counts["trace_set"], len(log.leaked_sets)
    (1, 1)

``to_json()`` writes schema ``safe-tracectx/audit`` version 2 (docs/audit-schema.md).
"""

from __future__ import annotations

import collections
import json
import os
from types import TracebackType
from typing import Any, Final, cast

from safe_tracectx._support import events
from safe_tracectx._support.callsite import CallSite, display_path
from safe_tracectx._support.events import Event
from safe_tracectx._support.pass_catalog import KINDS, PASSES, phase_label
from safe_tracectx.auditlog.document_types import AuditDocument, PassRun, PassStats, Phase, Site
from safe_tracectx.auditlog.documents import AUDIT_SCHEMA as JSON_SCHEMA
from safe_tracectx.auditlog.documents import AUDIT_VERSION as JSON_VERSION
from safe_tracectx.auditlog.documents import OUTSIDE_PASSES as OTHER

__all__ = ["JSON_SCHEMA", "JSON_VERSION", "PASS_RUN_KEYS", "AuditLog"]

#: Sub-phases (proxies reported under a label of their own inside a pass, by the function that made them or
#: by a function hooked as a phase) -> the kind of their pass.
_SUB_PHASES: Final = {
    **{label: spec.kind for spec in PASSES for _, label in spec.phases},
    **{spec.label: spec.kind for spec in PASSES if spec.hook == "phase"},
}
#: Sub-phases whose work is all on one side of the pair.
_SUB_PHASE_ROLES: Final = {"backward recompute": "backward"}
#: The keys of each entry of ``pass_runs`` (the ``detail`` of a ``pass_run`` event).
PASS_RUN_KEYS: Final = (
    "label", "kind", "role", "seconds", "changed", "proxies", "violations", "fingerprints", "thunderfx",
    "output_ids", "input_ids", "input_fingerprints",
)


def _relative(text: str) -> str:
    """A message with paths under the current folder made relative to it (as every report shows paths)."""
    try:
        here = os.getcwd() + os.sep
    except OSError:
        return text
    return text.replace(here, "")


def _site_json(site: CallSite | None) -> Site | None:
    return None if site is None else {"file": display_path(site.filename), "line": site.lineno, "function": site.function}


class AuditLog:
    """Events (kept up to ``max_events``) and counters (always complete).

    Counters keep counting after events are dropped; ``dropped`` says how many were.
    """

    def __init__(self, max_events: int | None = None) -> None:
        if max_events is not None and max_events < 0:
            raise ValueError(f"max_events must be None or >= 0, got {max_events}")
        self.max_events = max_events
        self.events: list[Event] = []
        self.dropped = 0
        self.counts: collections.Counter[str] = collections.Counter()
        self.proxies_by_site: collections.Counter[tuple[CallSite | None, str]] = collections.Counter()
        self.proxies_by_pass: collections.Counter[str] = collections.Counter()
        self.passes: dict[str, dict[str, Any]] = {}
        #: Every pass run in order: ``label``, ``kind``, ``role``, ``seconds``, ``changed``, ``proxies``,
        #: ``violations``, ``fingerprints`` (one per output trace, see ``safe_tracectx.traces.fingerprint``),
        #: ``thunderfx`` (the ThunderFX split of a compilation or of the splitter's run, else None), and what
        #: it was given: ``output_ids``, ``input_ids``, ``input_fingerprints`` (``safe_tracectx.hooks.trace_states``).
        self.pass_runs: list[dict[str, Any]] = []
        self.violations: list[Event] = []
        self.traceless_by_site: collections.Counter[CallSite | None] = collections.Counter()
        self._open_sets: dict[int, Event] = {}
        self._active = False

    # ---- recording -------------------------------------------------------------------

    def __enter__(self) -> AuditLog:
        self.start()
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()

    @property
    def running(self) -> bool:
        """True while the log receives events."""
        return self._active

    def start(self) -> None:
        """Begin receiving events (from every thread)."""
        if not self._active:
            events.sinks.append(self.record)
            self._active = True

    def stop(self) -> None:
        """Stop receiving events."""
        if self._active:
            events.sinks.remove(self.record)
            self._active = False

    def stopped(self) -> _Paused:
        """A block during which this log receives nothing (a clean-up that is not part of the report)."""
        return _Paused(self)

    def record(self, event: Event) -> None:
        """Count ``event`` and keep it unless ``max_events`` is reached."""
        self.counts[event.kind] += 1
        kind = event.kind
        if kind == "proxy_created":
            function = event.site.function if event.site is not None else ""
            pass_name = phase_label(event.pass_name, function) or OTHER
            self.proxies_by_site[(event.site, pass_name)] += 1
            self.proxies_by_pass[pass_name] += 1
        elif kind == "trace_set":
            self._open_sets[event.detail["block"]] = event
        elif kind == "trace_reset":
            self._open_sets.pop(event.detail["block"], None)
        elif kind == "violation":
            self.violations.append(event)
        elif kind == "proxy_traceless":
            site = event.site
            self.traceless_by_site[site] += 1
        elif kind == "pass_run":
            detail = event.detail
            self.pass_runs.append({key: detail.get(key) for key in PASS_RUN_KEYS})
            stats = self.passes.setdefault(
                detail.get("label") or event.pass_name or "?",
                {
                    "qualname": event.detail.get("qualname"),
                    "runs": 0,
                    "changed": 0,
                    "seconds": 0.0,
                    "traces": 0,
                    "violations": [],
                },
            )
            stats["runs"] += 1
            stats["changed"] += bool(event.detail.get("changed", False))
            stats["seconds"] += event.detail.get("seconds", 0.0)
            stats["traces"] += event.detail.get("traces", 0)
            stats["violations"].extend(event.detail.get("violations", []))
        if self.max_events is None or len(self.events) < self.max_events:
            self.events.append(event)
        else:
            self.dropped += 1

    # ---- views -----------------------------------------------------------------------

    @property
    def leaked_sets(self) -> list[Event]:
        """``set_tracectx`` calls seen while auditing whose reset never came."""
        return list(self._open_sets.values())

    def by_call_site(self) -> list[tuple[CallSite | None, str, int]]:
        """Proxy creations per (call site, pass), most first."""
        return [(site, pass_name, n) for (site, pass_name), n in self.proxies_by_site.most_common()]

    def phases(self) -> list[dict[str, Any]]:
        """The work by phase (tracing, each Transform, autodiff, split, each executor's fusion pass, remat, ...).

        One entry per pass label or sub-phase, in the order of :data:`~safe_tracectx._support.pass_catalog.KINDS`, the
        rest last: ``label``, ``kind``, ``runs``, ``seconds``, ``proxies`` (made while it was the innermost
        pass), ``by_role`` (its runs' proxies per role: ``forward``, ``backward``, ``none``).
        """
        table: dict[str, dict[str, Any]] = {}
        for run in self.pass_runs:
            entry = table.setdefault(
                run["label"],
                {"label": run["label"], "kind": run["kind"], "runs": 0, "seconds": 0.0, "proxies": 0,
                 "by_role": {"forward": 0, "backward": 0, "none": 0}},
            )
            entry["runs"] += 1
            entry["seconds"] += run["seconds"] or 0.0
            entry["by_role"][run["role"] or "none"] += run["proxies"] or 0
        for label, count in self.proxies_by_pass.items():
            entry = table.setdefault(
                label, {"label": label, "kind": _SUB_PHASES.get(label, "other"), "runs": 0, "seconds": 0.0,
                        "proxies": 0, "by_role": {"forward": 0, "backward": 0, "none": 0}},
            )
            entry["proxies"] = count
            if label in _SUB_PHASE_ROLES:
                entry["by_role"][_SUB_PHASE_ROLES[label]] = count
        order = {kind: index for index, kind in enumerate(KINDS)}
        return sorted(table.values(), key=lambda e: (order.get(e["kind"], len(order)), e["label"]))

    def report(self, *, top: int = 15) -> str:
        """A text report that fits a terminal and is stable enough to diff (``report.render_text``)."""
        from safe_tracectx.report.text import render_text

        return render_text(self.to_dict(events=False), top=top)

    def to_dict(self, *, events: bool = True) -> AuditDocument:
        """The JSON document (schema ``safe-tracectx/audit``, version 2) as a dict."""
        passes = {name: cast(PassStats, {**stats, "proxies": self.proxies_by_pass.get(name, 0)})
                  for name, stats in sorted(self.passes.items())}
        return {
            "schema": JSON_SCHEMA,
            "version": JSON_VERSION,
            "counts": dict(sorted(self.counts.items())),
            "kept": len(self.events),
            "dropped": self.dropped,
            "passes": passes,
            "proxies_by_pass": dict(sorted(self.proxies_by_pass.items())),
            "pass_runs": cast("list[PassRun]", list(self.pass_runs)),  # each holds PASS_RUN_KEYS
            "phases": cast("list[Phase]", self.phases()),
            "call_sites": [
                {"site": _site_json(site), "pass": pass_name, "count": count} for site, pass_name, count in self.by_call_site()
            ],
            "leaked_sets": [{"trace": e.trace, "site": _site_json(e.site), "thread": e.thread} for e in self.leaked_sets],
            "traceless": [
                {"site": _site_json(site), "count": count} for site, count in self.traceless_by_site.most_common()
            ],
            "violations": [
                {
                    "error": e.detail["code"],
                    "check": e.detail["check"],
                    "action": e.detail["action"],
                    "message": _relative(e.detail["message"]),
                    "fix": e.detail["fix"],
                    "kind": e.detail.get("kind"),
                    "names": e.detail.get("names", []),
                    "culprit": e.detail.get("culprit"),
                    "site": _site_json(e.site),
                    "pass": e.pass_name,
                    "thread": e.thread,
                }
                for e in self.violations
            ],
            "events": [
                {
                    "kind": e.kind,
                    "site": _site_json(e.site),
                    "thread": e.thread,
                    "trace_id": e.trace_id,
                    "trace": e.trace,
                    "pass": e.pass_name,
                    "detail": {k: (str(v) if isinstance(v, CallSite) else v) for k, v in e.detail.items()},
                }
                for e in (self.events if events else [])
            ],
        }

    def to_json(self, *, indent: int | None = 2) -> str:
        """``to_dict()`` as JSON text."""
        return json.dumps(self.to_dict(), indent=indent, default=str)


class _Paused:
    """``with log.stopped():`` the log misses what happens in the block, then listens again."""

    __slots__ = ("_log", "_was_running")

    def __init__(self, log: AuditLog) -> None:
        self._log = log
        self._was_running = False

    def __enter__(self) -> None:
        self._was_running = self._log.running
        self._log.stop()

    def __exit__(self, *exc_info: object) -> None:
        if self._was_running:
            self._log.start()
