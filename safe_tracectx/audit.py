"""The audit log: what happened to trace contexts and proxies while Thunder ran.

    >>> import torch, thunder
    >>> from safe_tracectx.audit import audit
    >>> with audit() as log:
    ...     _ = thunder.jit(lambda x: x.cos() + 1)(torch.ones(2))
    >>> log.counts["proxy_created"] > 0, log.violations
    (True, [])

``to_json()`` writes schema ``safe-tracectx/audit`` version 1 (docs/audit-schema.md).
"""

from __future__ import annotations

import collections
import json
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, Final

from safe_tracectx import events
from safe_tracectx.callsite import CallSite
from safe_tracectx.events import Event
from safe_tracectx.hooks.passes import phase_label

__all__ = ["JSON_SCHEMA", "JSON_VERSION", "AuditLog", "audit"]

JSON_SCHEMA: Final = "safe-tracectx/audit"
JSON_VERSION: Final = 1
OTHER: Final = "(outside remat passes)"


def _site_text(site: CallSite | None) -> str:
    return "(unknown)" if site is None else f"{site.short()} in {site.function}"


def _site_json(site: CallSite | None) -> dict[str, Any] | None:
    return None if site is None else {"file": site.filename, "line": site.lineno, "function": site.function}


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
        self.violations: list[Event] = []
        self._open_sets: dict[int, Event] = {}
        self._active = False

    # ---- recording -------------------------------------------------------------------

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
        elif kind == "pass_run":
            stats = self.passes.setdefault(
                event.pass_name or "?",
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

    def report(self, *, top: int = 15) -> str:
        """A text report that fits a terminal and is stable enough to diff."""
        out = ["safe-tracectx audit report", "=========================="]
        kinds = ", ".join(f"{kind} {self.counts[kind]}" for kind in sorted(self.counts)) or "none"
        out.append(f"events: {sum(self.counts.values())} ({kinds}); kept {len(self.events)}, dropped {self.dropped}")

        out += ["", "Remat passes (each output trace validated with check_trace)"]
        if not self.passes:
            out.append("  (no audited pass ran)")
        for name in sorted(self.passes):
            stats = self.passes[name]
            out.append(
                f"  {name:<28} runs {stats['runs']:>3}  changed its trace {stats['changed']:>3}  "
                f"{stats['seconds']:6.2f}s  proxies {self.proxies_by_pass.get(name, 0):>5}  "
                f"violations {len(stats['violations']):>3}"
            )

        out += ["", "Proxy creations by pass"]
        for name, count in sorted(self.proxies_by_pass.items(), key=lambda item: (-item[1], item[0])):
            out.append(f"  {count:>7}  {name}")

        sites = self.by_call_site()
        out += ["", f"Top {min(top, len(sites))} of {len(sites)} proxy-creating call sites"]
        for site, pass_name, count in sites[:top]:
            out.append(f"  {count:>7}  {pass_name:<28}  {_site_text(site)}")
        out += ["", "Top 3 proxy-creating call sites of each remat pass"]
        for name in sorted(self.proxies_by_pass):
            if name == OTHER:
                continue
            for site, _, count in [s for s in sites if s[1] == name][:3]:
                out.append(f"  {count:>7}  {name:<28}  {_site_text(site)}")

        leaked = self.leaked_sets
        out += [
            "",
            "Trace set/reset balance",
            f"  sets {self.counts['trace_set']}, resets {self.counts['trace_reset']}, never reset {len(leaked)}",
        ]
        for event in leaked:
            out.append(f"  never reset: set_tracectx({event.trace}) at {_site_text(event.site)}")

        out += ["", f"Violations ({len(self.violations)})"]
        for event in self.violations:
            detail = event.detail
            out.append(f"  [{detail['code']}, {detail['action']}] {detail['message']}")
            out.append(f"      at {_site_text(event.site)}")
            out.append(f"      fix: {detail['fix']}")
        if not self.violations:
            out.append("  (none)")
        return "\n".join(out)

    def to_dict(self) -> dict[str, Any]:
        """The JSON document (schema ``safe-tracectx/audit``, version 1) as a dict."""
        return {
            "schema": JSON_SCHEMA,
            "version": JSON_VERSION,
            "counts": dict(sorted(self.counts.items())),
            "dropped": self.dropped,
            "passes": {
                name: {**stats, "proxies": self.proxies_by_pass.get(name, 0)} for name, stats in sorted(self.passes.items())
            },
            "proxies_by_pass": dict(sorted(self.proxies_by_pass.items())),
            "call_sites": [
                {"site": _site_json(site), "pass": pass_name, "count": count} for site, pass_name, count in self.by_call_site()
            ],
            "leaked_sets": [{"trace": e.trace, "site": _site_json(e.site), "thread": e.thread} for e in self.leaked_sets],
            "violations": [
                {
                    "error": e.detail["code"],
                    "event": e.detail["event"],
                    "action": e.detail["action"],
                    "message": e.detail["message"],
                    "fix": e.detail["fix"],
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
                for e in self.events
            ],
        }

    def to_json(self, *, indent: int | None = 2) -> str:
        """``to_dict()`` as JSON text."""
        return json.dumps(self.to_dict(), indent=indent, default=str)


@contextmanager
def audit(*, max_events: int | None = None) -> Iterator[AuditLog]:
    """Record everything Thunder does with trace contexts in the block.

    Installs the hooks for the block if they are not installed (keeping the policy in force).
    """
    from safe_tracectx.hooks import install, is_installed, uninstall

    owns = not is_installed()
    if owns:
        install()
    log = AuditLog(max_events=max_events)
    log.start()
    try:
        yield log
    finally:
        log.stop()
        if owns:
            uninstall()
