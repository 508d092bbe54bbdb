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

import array
import collections
import contextlib
import dataclasses
import json
import operator
import threading
from collections.abc import Iterator
from types import TracebackType
from typing import Any, Final, cast

from safe_tracectx._support import events
from safe_tracectx._support.callsite import CallSite, SiteKey
from safe_tracectx._support.events import Event
from safe_tracectx._support.labels import describe_trace
from safe_tracectx._support.pass_catalog import phase_label
from safe_tracectx.auditlog.document_types import AuditDocument, PassRun, PassStats, Phase
from safe_tracectx.auditlog.documents import AUDIT_SCHEMA as JSON_SCHEMA
from safe_tracectx.auditlog.documents import AUDIT_VERSION as JSON_VERSION
from safe_tracectx.auditlog.documents import OUTSIDE_PASSES as OTHER
from safe_tracectx.auditlog.documents import pass_run_document, relative_paths, site_document
from safe_tracectx.auditlog.phases import phases

__all__ = ["JSON_SCHEMA", "JSON_VERSION", "PASS_RUN_KEYS", "AuditLog", "checked_max_events"]

#: The keys of each entry of ``pass_runs`` (the ``detail`` of a ``pass_run`` event).
PASS_RUN_KEYS: Final = (
    "label", "kind", "role", "seconds", "changed", "proxies", "violations", "fingerprints", "thunderfx",
    "output_ids", "input_ids", "input_fingerprints",
)


#: What a kept proxy event shares with others: site, thread, trace id, trace, pass, and the wrapper that made it.
_ProxyContext = tuple[SiteKey | None, str, int | None, str, str | None, str | None]


def checked_max_events(max_events: object) -> int | None:
    """``max_events`` if it is None or an integer >= 0; else the error that says what it must be."""
    if max_events is None:
        return None
    try:
        if isinstance(max_events, bool):
            raise TypeError
        number = operator.index(max_events)  # type: ignore[arg-type]  # an int, or one of numpy's; else TypeError
    except TypeError:
        raise TypeError(f"max_events must be None or an integer >= 0, got {max_events!r:.60}") from None
    if number < 0:
        raise ValueError(f"max_events must be None or >= 0, got {number}")
    return number


class AuditLog:
    """Events (kept up to ``max_events``) and counters (always complete).

    Counters keep counting after events are dropped; ``dropped`` says how many were.
    A proxy made is counted per (call site, pass) as it happens; a kept one is a
    name and the index of its context (site, thread, trace, pass), and becomes an
    ``Event`` only when ``events`` or ``to_dict()`` is read::

        >>> from safe_tracectx._support import events
        >>> with AuditLog(max_events=1) as log:
        ...     for name in ("t0", "t1"):
        ...         events.proxy_created(None, name)
        >>> [(e.kind, e.detail["name"], e.site.function) for e in log.events], log.dropped
        ([('proxy_created', 't0', '<module>')], 1)
        >>> [(site.function, pass_name, n) for site, pass_name, n in log.by_call_site()]
        [('<module>', '(outside remat passes)', 2)]
    """

    def __init__(self, max_events: int | None = None) -> None:
        self.max_events = checked_max_events(max_events)
        self.dropped = 0
        self.counts: collections.Counter[str] = collections.Counter()
        #: Proxies made per (call site, innermost pass running): the raw counts the views derive from.
        self._proxy_counts: collections.Counter[tuple[SiteKey | None, str | None]] = collections.Counter()
        self._derived: tuple[int, collections.Counter[tuple[CallSite | None, str]], collections.Counter[str]] | None = None
        #: The kept events: the others as (kept proxies before it, Event); the kept proxies as their names and
        #: the index of their context in _contexts (indices in insertion order: new ones added under the lock).
        self._kept_events: list[tuple[int, Event]] = []
        self._proxy_names: list[str] = []
        self._proxy_context: array.array[int] = array.array("Q")
        self._contexts: dict[_ProxyContext, int] = {}
        #: Held while a record counts and keeps what it was given (every thread records into the one log).
        self._lock = threading.Lock()
        self.passes: dict[str, dict[str, Any]] = {}
        #: Every pass run in order, as recorded: its fingerprints packed (``pass_runs`` is each as documents hold it).
        self._pass_runs: list[dict[str, Any]] = []
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
            events.proxy_sinks.append(self.record_proxy)
            self._active = True

    def stop(self) -> None:
        """Stop receiving events."""
        if self._active:
            events.sinks.remove(self.record)
            events.proxy_sinks.remove(self.record_proxy)
            self._active = False

    @contextlib.contextmanager
    def stopped(self) -> Iterator[None]:
        """A block during which this log receives nothing (a clean-up that is not part of the report)."""
        was_running = self._active
        self.stop()
        try:
            yield
        finally:
            if was_running:
                self.start()

    def record_proxy(
        self, site: SiteKey | None, thread: str, trace: object, pass_name: str | None, name: str, via: str | None
    ) -> None:
        """Count a proxy made (``events.proxy_created``) and keep it unless ``max_events`` is reached."""
        max_events = self.max_events
        keep = max_events is None or len(self._proxy_names) + len(self._kept_events) < max_events
        context = (site, thread, None if trace is None else id(trace), describe_trace(trace), pass_name, via) if keep else None
        # Under the lock: a count is a read and a write, which another thread's must not come between (it would be
        # lost), and a proxy's name and the index of its context are two appends, which another thread's proxy must
        # not come between (it would pair this name with that thread's context).
        with self._lock:
            self.counts["proxy_created"] += 1
            self._proxy_counts[(site, pass_name)] += 1
            if context is None or (max_events is not None and len(self._proxy_names) + len(self._kept_events) >= max_events):
                self.dropped += 1  # the limit was reached (by another thread meanwhile, maybe)
                return
            index = self._contexts.get(context)
            if index is None:
                index = self._contexts[context] = len(self._contexts)
            self._proxy_context.append(index)
            self._proxy_names.append(name)

    def record(self, event: Event) -> None:
        """Count ``event`` and keep it unless ``max_events`` is reached (under the lock: every thread records here)."""
        with self._lock:
            self._record(event)

    def _record(self, event: Event) -> None:
        self.counts[event.kind] += 1
        kind = event.kind
        if kind == "proxy_created":  # emitted as an Event: counted as record_proxy counts, kept as it is
            self._proxy_counts[(event.site, event.pass_name)] += 1
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
            self._pass_runs.append({key: detail.get(key) for key in PASS_RUN_KEYS})
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
        if self.max_events is None or len(self._proxy_names) + len(self._kept_events) < self.max_events:
            self._kept_events.append((len(self._proxy_names), event))
        else:
            self.dropped += 1

    # ---- views -----------------------------------------------------------------------

    @property
    def events(self) -> list[Event]:
        """The kept events, in the order they happened (each kept proxy's Event made now)."""
        with self._lock:  # a copy: other threads may be recording meanwhile
            names, context_of = self._proxy_names[:], self._proxy_context[:]
            kept_events, kept_contexts = self._kept_events[:], list(self._contexts)
        sites: dict[SiteKey, CallSite] = {}
        contexts = [
            (None if site is None else sites.setdefault(site, CallSite(*site)), thread, trace_id, trace, pass_name, via)
            for site, thread, trace_id, trace, pass_name, via in kept_contexts
        ]
        kept: list[Event] = []
        made = 0
        for before, event in [*kept_events, (len(names), None)]:
            for at in range(made, before):
                site, thread, trace_id, trace, pass_name, via = contexts[context_of[at]]
                detail: dict[str, Any] = {"name": names[at]} if via is None else {"name": names[at], "via": via}
                kept.append(Event("proxy_created", site, thread, trace_id, trace, pass_name, detail))
            made = before
            if event is not None:
                kept.append(event if event.kind != "pass_run" else dataclasses.replace(event, detail=pass_run_document(event.detail)))
        return kept

    @property
    def pass_runs(self) -> list[dict[str, Any]]:
        """Every pass run in order: ``label``, ``kind``, ``role``, ``seconds``, ``changed``, ``proxies``,
        ``violations``, ``fingerprints`` (one per output trace, see ``safe_tracectx.traces.fingerprint``),
        ``thunderfx`` (the ThunderFX split of a compilation or of the splitter's run, else None), and what
        it was given: ``output_ids``, ``input_ids``, ``input_fingerprints`` (``safe_tracectx.hooks.trace_states``)."""
        return [pass_run_document(run) for run in self._pass_runs]

    @property
    def proxies_by_site(self) -> collections.Counter[tuple[CallSite | None, str]]:
        """Proxy creations per (call site, pass or sub-phase label), in the order each was first seen."""
        return self._proxy_views()[0]

    @property
    def proxies_by_pass(self) -> collections.Counter[str]:
        """Proxy creations per pass or sub-phase label (``(outside remat passes)`` for the rest)."""
        return self._proxy_views()[1]

    def _proxy_views(self) -> tuple[collections.Counter[tuple[CallSite | None, str]], collections.Counter[str]]:
        """The raw counts by (call site, pass) labelled as reports show them (made again once more proxies came)."""
        made = self.counts["proxy_created"]
        if self._derived is None or self._derived[0] != made:
            by_site: collections.Counter[tuple[CallSite | None, str]] = collections.Counter()
            by_pass: collections.Counter[str] = collections.Counter()
            with self._lock:  # a copy: other threads may be counting meanwhile
                raw = list(self._proxy_counts.items())
            for (site, pass_name), count in raw:
                label = phase_label(pass_name, "" if site is None else site[2]) or OTHER
                by_site[(None if site is None else CallSite(*site), label)] += count
                by_pass[label] += count
            self._derived = (made, by_site, by_pass)
        return self._derived[1], self._derived[2]

    @property
    def leaked_sets(self) -> list[Event]:
        """``set_tracectx`` calls seen while auditing whose reset never came."""
        return list(self._open_sets.values())

    def by_call_site(self) -> list[tuple[CallSite | None, str, int]]:
        """Proxy creations per (call site, pass), most first."""
        return [(site, pass_name, n) for (site, pass_name), n in self.proxies_by_site.most_common()]

    def phases(self) -> list[dict[str, Any]]:
        """The work by phase (:func:`safe_tracectx.auditlog.phases.phases`)."""
        return phases(self._pass_runs, self.proxies_by_pass)

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
            "kept": len(self._proxy_names) + len(self._kept_events),
            "dropped": self.dropped,
            "passes": passes,
            "proxies_by_pass": dict(sorted(self.proxies_by_pass.items())),
            "pass_runs": cast("list[PassRun]", self.pass_runs),  # each holds PASS_RUN_KEYS
            "phases": cast("list[Phase]", self.phases()),
            "call_sites": [
                {"site": site_document(site), "pass": pass_name, "count": count} for site, pass_name, count in self.by_call_site()
            ],
            "leaked_sets": [{"trace": e.trace, "site": site_document(e.site), "thread": e.thread} for e in self.leaked_sets],
            "traceless": [
                {"site": site_document(site), "count": count} for site, count in self.traceless_by_site.most_common()
            ],
            "violations": [
                {
                    "error": e.detail["code"],
                    "check": e.detail["check"],
                    "action": e.detail["action"],
                    "message": relative_paths(e.detail["message"]),
                    "fix": e.detail["fix"],
                    "kind": e.detail.get("kind"),
                    "names": e.detail.get("names", []),
                    "culprit": e.detail.get("culprit"),
                    "site": site_document(e.site),
                    "pass": e.pass_name,
                    "thread": e.thread,
                }
                for e in self.violations
            ],
            "events": [
                {
                    "kind": e.kind,
                    "site": site_document(e.site),
                    "thread": e.thread,
                    "trace_id": e.trace_id,
                    "trace": e.trace,
                    "pass": e.pass_name,
                    "detail": {k: (str(v) if isinstance(v, CallSite) else v) for k, v in e.detail.items()},
                }
                for e in (self.events if events else ())
            ],
        }

    def to_json(self, *, indent: int | None = 2) -> str:
        """``to_dict()`` as JSON text."""
        return json.dumps(self.to_dict(), indent=indent, default=str)

