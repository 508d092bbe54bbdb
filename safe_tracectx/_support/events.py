"""The event stream that hooks emit into and audits subscribe to.

Emitting costs one list check when nobody listens. A proxy made is no
``Event``: it goes to the proxy sinks as plain values (``proxy_created``), for
an audit to count; every other event goes to ``sinks``::

    >>> from safe_tracectx._support.events import Event, emit, sinks
    >>> seen = []
    >>> sinks.append(seen.append)
    >>> emit("trace_set", trace=None)
    >>> sinks.pop() and None
    >>> [e.kind for e in seen]
    ['trace_set']
"""

from __future__ import annotations

import dataclasses
import sys
import threading
from collections.abc import Callable
from contextvars import ContextVar
from typing import Any, Final, Literal

from safe_tracectx._support.callsite import CallSite, SiteKey, find_site_key
from safe_tracectx._support.labels import describe_trace

__all__ = [
    "Event", "EventKind", "ProxySink", "current_pass", "emit", "naming_hooked", "own_work", "proxy_created", "proxy_sinks",
    "sinks",
]

EventKind = Literal["proxy_created", "proxy_traceless", "trace_set", "trace_reset", "violation", "pass_run"]

#: Called with every event while an audit is active.
sinks: Final[list[Callable[[Event], None]]] = []
#: Called with ``(site, thread, trace, pass_name, name, via)`` for every proxy made while an audit is active.
ProxySink = Callable[[SiteKey | None, str, object, str | None, str, str | None], None]
proxy_sinks: Final[list[ProxySink]] = []


class _Switch:
    __slots__ = ("on",)

    def __init__(self) -> None:
        self.on = False


#: On while the hooks are in place (set by ``hooks.installer``): the proxy naming hook records each proxy it names,
#: and a compiled backward the hooks wrapped (``hooks.backward_calls``) checks its saved values.
naming_hooked: Final[_Switch] = _Switch()
#: True in a context where this package runs Thunder for itself (``hooks.replay``): nothing there is an event.
own_work: Final[ContextVar[bool]] = ContextVar("safe_tracectx.own_work", default=False)
#: The rematerialization pass running now in this context (None: outside every audited pass).
current_pass: Final[ContextVar[str | None]] = ContextVar("safe_tracectx.current_pass", default=None)


@dataclasses.dataclass(frozen=True, slots=True)
class Event:
    """One thing that happened: what, where, in which thread, trace and pass.

    ``detail`` holds the kind's own data: ``name`` (proxy_created), ``code``,
    ``check``, ``action`` and ``message`` (violation), ``seconds`` (pass_run).
    """

    kind: EventKind
    site: CallSite | None
    thread: str
    trace_id: int | None
    trace: str
    pass_name: str | None
    detail: dict[str, Any]


def emit(kind: EventKind, /, *, trace: object, site: CallSite | None = None, **detail: Any) -> None:
    """Send an event to every sink (nothing to do when there is none)."""
    if not sinks or own_work.get():
        return
    event = Event(
        kind=kind,
        site=site,
        thread=threading.current_thread().name,
        trace_id=None if trace is None else id(trace),
        trace=describe_trace(trace),
        pass_name=current_pass.get(),
        detail=detail,
    )
    for sink in list(sinks):
        sink(event)


def proxy_created(trace: object, name: str, *, via: str | None = None) -> None:
    """Tell every proxy sink that ``name`` was made in ``trace``, at the caller's call site (``via``: by which
    of the package's wrappers, if one)."""
    if not proxy_sinks or own_work.get():
        return
    site = find_site_key(sys._getframe(1))
    thread = threading.current_thread().name
    pass_name = current_pass.get()
    for sink in list(proxy_sinks):
        sink(site, thread, trace, pass_name, name, via)
